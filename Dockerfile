# The image a Seed runs in (seed 001 §Sandboxing): what the kernel needs to
# build itself from the Seed's own source and to run. `seed run` builds it
# with no build context (`podman build -t TAG - < Dockerfile`), so nothing
# from the folder can be copied in, and tags it with this file's content
# hash. Where the engine has no debian:bookworm, `seed` makes one from the
# Debian mirror (mmdebstrap) first.
FROM docker.io/library/debian:bookworm

ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8

# postgresql-15 without a cluster of its own: the kernel runs initdb in the
# Seed's .seed/postgres. No manuals, docs or translations (copyrights kept).
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
        > /etc/dpkg/dpkg.cfg.d/01-seed-lean \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null \
 && echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf \
 && apt-get install -y -qq --no-install-recommends \
        ca-certificates gcc libc6-dev make pkg-config meson ninja-build python3 git \
        libpq-dev libcurl4-openssl-dev libjansson-dev libmicrohttpd-dev libssl-dev \
        libyaml-dev libgit2-dev libseccomp-dev libpsl-dev publicsuffix \
        bubblewrap postgresql-15 nodejs >/dev/null \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
