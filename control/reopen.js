// reopen.js — on "This Seed is private" after a link from another site
// (the owner's badge on an app page, say): the browser holds the
// SameSite=Strict sign-in back until the owner opens the control plane from
// here, so the link that does it keeps an #ask= fragment the link carried
// (a page path and a picture's id, shown for editing there, never sent) or
// the preview bar's #decide/<evolution>/<action> (which points at the
// control plane's own button there, never acts).
(function () {
  'use strict';
  const a = document.getElementById('reopen');
  const h = window.location.hash;
  if (a && (/^#ask=[A-Za-z0-9\-._~!$&'()*+,;=:@%/]{1,400}$/.test(h) ||
            /^#decide\/evo_[0-9a-f]{16}\/(apply|changes|discard)$/.test(h))) {
    // "?" makes it a new page load (the same URL with the same fragment
    // would only scroll); the control plane drops it again.
    a.href = '/_seed/?' + window.location.hash;
  }
})();
