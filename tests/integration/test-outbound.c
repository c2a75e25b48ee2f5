/* test-outbound.c — real sandboxes of every profile behind the real egress
 * proxy, as the kernel wires them, with "the internet" made of the test's
 * own private network (tests/common/testnet.h): an HTTPS server of the test
 * (Python's http.server, with a certificate made here) listens on
 * 93.184.215.14:443 and stands in for the npm registry and for an API an
 * app may call; names reach the proxy through its resolver seam. Nothing
 * needs the real network.
 *
 * Covered: an evolution's `npm install` of a small package through the
 * proxy against the registry stand-in; each profile's policy (build
 * profiles reach the registries and hosts granted for evolutions; the live
 * organism and previews only hosts granted for the organism), grants and
 * revocations taking effect for the next connection; the live organism's
 * Node.js fetch() of a granted host and the refusal of another, kept with
 * the sandbox's label; a client that ignores the proxy variables reaches
 * nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "base/proc.h"
#include "egress/egress.h"
#include "sandbox/sandbox.h"

#include "../common/testnet.h"
#include "../common/comment.h"

#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define WAIT_MS 30000
#define REGISTRY "registry.npmjs.org" /* npm's default: nothing inside needs configuring */
#define PARTNER "api.partner-service.com"
#define STRANGER "exfil-target.net"

static char *no_net;        /* why the private network could not be made, or NULL */
static char *unavailable;   /* why sandboxes cannot run here, or NULL */
static char root[256];      /* temp dir holding everything */
static char seed[512];      /* a Seed folder = the workspace */
static char cache[PATH_MAX];
static pid_t server_pid;    /* the HTTPS stand-in */
static char server_log[PATH_MAX];
static struct egress *egress;
static char *const evolvable[] = {"organism/", "knowledge/", "skills/", NULL};
/* The stand-in's certificate, trusted as the real registry's CA would be. */
static char *const ca_env[] = {"NODE_EXTRA_CA_CERTS=/workspace/organism/ca.pem",
                               "npm_config_cafile=/workspace/organism/ca.pem", NULL};

/* The stand-in: GET /seed-leftpad (the packument), its tarball (made at
 * start), /hello and /ping; every request's path goes to stdout. */
static const char server_py[] =
        "import hashlib, http.server, io, json, ssl, sys, tarfile\n"
        "host, cert, key = sys.argv[1:4]\n"
        "buf = io.BytesIO()\n"
        "with tarfile.open(fileobj=buf, mode='w:gz') as t:\n"
        "    for name, data in (('package/package.json', json.dumps({'name': 'seed-leftpad', 'version': '1.0.0',\n"
        "                        'main': 'index.js'}).encode()),\n"
        "                       ('package/index.js', b\"module.exports = (s, n) => String(s).padStart(n);\\n\")):\n"
        "        info = tarfile.TarInfo(name); info.size = len(data); t.addfile(info, io.BytesIO(data))\n"
        "tgz = buf.getvalue()\n"
        "tar_url = 'https://" REGISTRY "/seed-leftpad/-/seed-leftpad-1.0.0.tgz'\n"
        "doc = json.dumps({'name': 'seed-leftpad', 'dist-tags': {'latest': '1.0.0'}, 'versions': {'1.0.0': {\n"
        "    'name': 'seed-leftpad', 'version': '1.0.0', 'main': 'index.js',\n"
        "    'dist': {'tarball': tar_url, 'shasum': hashlib.sha1(tgz).hexdigest()}}}}).encode()\n"
        "routes = {'/seed-leftpad': ('application/json', doc), '/seed-leftpad/-/seed-leftpad-1.0.0.tgz':\n"
        "          ('application/octet-stream', tgz), '/hello': ('text/plain', b'hello from the partner'),\n"
        "          '/ping': ('text/plain', b'pong')}\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        print('GET', self.headers.get('Host'), self.path, flush=True)\n"
        "        kind, body = routes.get(self.path, ('text/plain', None))\n"
        "        self.send_response(200 if body is not None else 404)\n"
        "        self.send_header('Content-Type', kind)\n"
        "        self.send_header('Content-Length', str(len(body or b'')))\n"
        "        self.end_headers()\n"
        "        self.wfile.write(body or b'')\n"
        "    def log_message(self, *a):\n"
        "        pass\n"
        "s = http.server.ThreadingHTTPServer((host, 443), H)\n"
        "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
        "ctx.load_cert_chain(cert, key)\n"
        "s.socket = ctx.wrap_socket(s.socket, server_side=True)\n"
        "print('ready', flush=True)\n"
        "s.serve_forever()\n";

/* Every test name resolves to the stand-in. */
static int resolve(void *userdata, const char *host, struct sockaddr_storage *ret, size_t max, size_t *ret_n) {
        (void)userdata;
        if (max < 1 || (!streq(host, REGISTRY) && !streq(host, PARTNER) && !streq(host, STRANGER)))
                return -ENOENT;
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ret[0];
        *s4 = (struct sockaddr_in){.sin_family = AF_INET};
        if (inet_pton(AF_INET, TESTNET_V4, &s4->sin_addr) != 1)
                return -EINVAL;
        *ret_n = 1;
        return 0;
}

static void require_all(void) {
        if (no_net || unavailable) {
                print_message("# SKIP %s\n", no_net ? no_net : unavailable);
                skip();
        }
}

static void write_at(const char *dir, const char *rel, const char *content, mode_t mode) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_non_null(p);
        assert_int_equal(write_file_atomic(p, content, strlen(content), mode), 0);
}

/* A self-signed certificate for the stand-in's names, in PEM: the key and
 * the certificate to root, the certificate (the CA apps trust) into the
 * workspace. */
static int make_certificate(void) {
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        if (!key || !x)
                return -1;
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), -3600);
        X509_gmtime_adj(X509_getm_notAfter(x), 86400);
        X509_set_pubkey(x, key);
        X509_NAME *name = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)REGISTRY, -1, -1, 0);
        X509_set_issuer_name(x, name);
        X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name,
                                                  "DNS:" REGISTRY ",DNS:" PARTNER ",DNS:" STRANGER);
        X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints, "critical,CA:TRUE");
        if (!san || !bc || !X509_add_ext(x, san, -1) || !X509_add_ext(x, bc, -1) || !X509_sign(x, key, EVP_sha256()))
                return -1;
        X509_EXTENSION_free(san);
        X509_EXTENSION_free(bc);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/key.pem", root);
        FILE *f = fopen(path, "w");
        if (!f || !PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL))
                return -1;
        fclose(f);
        const char *certs[] = {"cert.pem", "seed/organism/ca.pem"};
        for (size_t i = 0; i < ARRAY_SIZE(certs); i++) {
                snprintf(path, sizeof path, "%s/%s", root, certs[i]);
                if (!(f = fopen(path, "w")) || !PEM_write_X509(f, x))
                        return -1;
                fclose(f);
        }
        EVP_PKEY_free(key);
        X509_free(x);
        return 0;
}

/* The server's log, or "" (caller frees). */
static char *server_said(void) {
        char *log = NULL;
        if (read_file(server_log, 1 << 20, &log, NULL) < 0)
                return strdup("");
        return log;
}

static int start_server(void) {
        char script[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
        snprintf(script, sizeof script, "%s/registry.py", root);
        snprintf(cert, sizeof cert, "%s/cert.pem", root);
        snprintf(key, sizeof key, "%s/key.pem", root);
        snprintf(server_log, sizeof server_log, "%s/registry.log", root);
        if (write_file_atomic(script, server_py, strlen(server_py), 0600) < 0)
                return -1;
        int out = open(server_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0)
                return -1;
        char *argv[] = {"/usr/bin/python3", script, TESTNET_V4, cert, key, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
        int r = proc_spawn(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = out}, &server_pid);
        close(out);
        if (r < 0)
                return r;
        for (int64_t deadline = now_ms() + WAIT_MS; now_ms() < deadline;) {
                _cleanup_free_ char *log = server_said();
                if (strstr(log, "ready\n"))
                        return 0;
                if (waitpid(server_pid, NULL, WNOHANG) == server_pid) {
                        server_pid = 0;
                        fprintf(stderr, "the registry stand-in died: %s\n", log);
                        return -1;
                }
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

static int setup(void **state) {
        (void)state;
        char tmpl[] = "/tmp/itest-outbound.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(root, sizeof root, "%s", tmpl);
        snprintf(seed, sizeof seed, "%s/seed", root);
        snprintf(cache, sizeof cache, "%s/.seed/cache", seed);
        const char *dirs[] = {"organism", "knowledge", "skills", ".seed/cache", ".git"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                _cleanup_free_ char *p = path_join(seed, dirs[i]);
                assert_int_equal(mkdir_p(p, 0755), 0);
        }
        write_at(seed, "organism/package.json", "{\"name\": \"app\", \"version\": \"1.0.0\", \"private\": true}\n", 0644);
        char *msg = NULL;
        if (sandbox_check(&msg) < 0)
                unavailable = msg ? msg : strdup("sandbox_check failed");
        else
                free(msg);
        if (no_net || unavailable)
                return 0;
        if (make_certificate() < 0 || start_server() < 0) {
                no_net = strdup("the registry stand-in could not start");
                return 0;
        }
        char *const registries[] = {REGISTRY, NULL};
        assert_int_equal(egress_new(&(struct egress_config){.registries = registries}, &egress), 0);
        egress_set_resolver(egress, resolve, NULL);
        return 0;
}

static int teardown(void **state) {
        (void)state;
        egress_free(egress);
        if (server_pid > 0) {
                (void)kill(server_pid, SIGKILL);
                (void)waitpid(server_pid, NULL, 0);
        }
        rm_rf(root);
        free(no_net);
        free(unavailable);
        return 0;
}

static bool profile_private(enum sandbox_profile p) {
        return p == SANDBOX_LIVE || p == SANDBOX_PREVIEW;
}

/* sh -c script in a sandbox of profile behind the proxy; the exit code, the
 * output in *ret_out (caller frees). */
static int run_in(enum sandbox_profile profile, const char *label, const char *script, char **ret_out) {
        struct sandbox_spec spec = {
                .profile = profile,
                .seed_dir = seed,
                .workspace = seed,
                .evolvable = evolvable,
                .workspace_readonly = profile_private(profile),
                .cache_dir = cache,
                .port = 8080,
                .egress = egress,
                .label = label,
                .extra_env = ca_env,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", (char *)script, NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 180000, &res), 0);
        assert_false(res.timed_out);
        *ret_out = TAKE_PTR(res.output);
        proc_result_done(&res);
        return res.exit_code;
}

/* An evolution installs a package from "the npm registry": npm, as it
 * comes, through HTTPS_PROXY, the door and the proxy, with the registry
 * allowed for evolutions; the package lands in organism/node_modules. */
static void test_npm_install(void **state) {
        (void)state;
        require_all();
        _cleanup_free_ char *out = NULL;
        int code = run_in(SANDBOX_EVOLUTION, "evolution evo_npm",
                          "cd /workspace/organism && npm_config_update_notifier=false npm install --no-audit --no-fund "
                          "seed-leftpad 2>&1 && node -e 'console.log(\"padded:\" + require(\"seed-leftpad\")(\"x\", 4))'",
                          &out);
        _cleanup_free_ char *log = server_said();
        if (code != 0) {
                print_comment("npm: ", out);
                print_comment("registry: ", log);
                fail_msg("npm install failed (%d)", code);
        }
        assert_non_null(strstr(out, "padded:   x\n"));
        assert_non_null(strstr(log, "GET " REGISTRY " /seed-leftpad/-/seed-leftpad-1.0.0.tgz\n"));
        _cleanup_free_ char *pkg = path_join(seed, "organism/node_modules/seed-leftpad/index.js");
        assert_true(path_exists(pkg));
        rm_rf(pkg); /* leaves the rest for the next tests to ignore */
}

/* "<label>: <curl's HTTP code>" of each host, from a sandbox of profile. */
static char *reach(enum sandbox_profile profile, const char *hosts) {
        char script[1024];
        snprintf(script, sizeof script,
                 "for h in %s; do echo \"$h $(curl -s -o /dev/null -m 20 --cacert /workspace/organism/ca.pem "
                 "-w '%%{http_code}' https://$h/ping)\"; done",
                 hosts);
        char *out = NULL;
        assert_int_equal(run_in(profile, sandbox_profile_name(profile), script, &out), 0);
        return out;
}

static void expect(const char *out, const char *host, bool reached, enum sandbox_profile p) {
        char want[128];
        snprintf(want, sizeof want, "%s 200\n", host);
        bool got = strstr(out, want) != NULL;
        if (got != reached) {
                print_comment("", out);
                fail_msg("%s sandbox: %s was %sreached", sandbox_profile_name(p), host, got ? "" : "not ");
        }
}

static const enum sandbox_profile all_profiles[] = {SANDBOX_EVOLUTION, SANDBOX_BUILD, SANDBOX_TEST, SANDBOX_LIVE,
                                                     SANDBOX_PREVIEW};

/* Each profile's policy, and grants and revocations taking effect for the
 * next connection: build profiles reach the registry and what is granted
 * for evolutions, the live organism and previews only what is granted for
 * the organism. */
static void test_policy_per_profile(void **state) {
        (void)state;
        require_all();
        const char *hosts = REGISTRY " " PARTNER;
        for (int step = 0; step < 4; step++) {
                /* 0: nothing granted; 1: PARTNER for the organism; 2: for
                 * evolutions too; 3: both revoked. */
                if (step == 1)
                        assert_int_equal(egress_grant(egress, EGRESS_SCOPE_ORGANISM, PARTNER), 0);
                if (step == 2)
                        assert_int_equal(egress_grant(egress, EGRESS_SCOPE_EVOLUTION, "*.partner-service.com"), 0);
                if (step == 3) {
                        assert_int_equal(egress_revoke(egress, EGRESS_SCOPE_ORGANISM, PARTNER), 0);
                        assert_int_equal(egress_revoke(egress, EGRESS_SCOPE_EVOLUTION, "*.partner-service.com"), 0);
                }
                for (size_t k = 0; k < ARRAY_SIZE(all_profiles); k++) {
                        enum sandbox_profile p = all_profiles[k];
                        _cleanup_free_ char *out = reach(p, hosts);
                        bool live = profile_private(p);
                        expect(out, REGISTRY, !live, p);
                        expect(out, PARTNER, live ? step == 1 || step == 2 : step == 2, p);
                }
        }
}

/* The live organism's Node.js fetch() (no HTTP client of its own, only
 * HTTPS_PROXY as the sandbox sets it) gets a granted host's answer and is
 * refused another; the refusal is kept with the sandbox's label. A client
 * that ignores the proxy variables reaches nothing at all. */
static void test_live_fetch(void **state) {
        (void)state;
        require_all();
        assert_int_equal(egress_grant(egress, EGRESS_SCOPE_ORGANISM, PARTNER), 0);
        const char *script =
                "node -e '"
                "const get = (u) => fetch(u).then(r => r.text()).then(t => console.log(u, \"->\", t),"
                "  e => console.log(u, \"failed:\", (e.cause && e.cause.message) || e.message));"
                "get(\"https://" PARTNER "/hello\").then(() => get(\"https://" STRANGER "/hello\"));'; "
                "env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy -u ALL_PROXY "
                "curl -sS -m 10 --cacert /workspace/organism/ca.pem https://" PARTNER "/hello 2>&1; "
                "echo direct=$?";
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_in(SANDBOX_LIVE, "live", script, &out), 0);
        print_comment("live: ", out);
        assert_non_null(strstr(out, "https://" PARTNER "/hello -> hello from the partner\n"));
        assert_non_null(strstr(out, "https://" STRANGER "/hello failed: egress proxy refused " STRANGER ":443"));
        assert_non_null(strstr(out, "direct="));
        assert_null(strstr(out, "direct=0\n"));
        struct egress_refusal *refused = NULL;
        size_t n = 0;
        assert_int_equal(egress_refusals(egress, &refused, &n), 0);
        bool kept = false;
        for (size_t i = 0; i < n; i++)
                kept |= streq(refused[i].host, STRANGER) && streq(refused[i].door, "live");
        free(refused);
        assert_true(kept);
        assert_int_equal(egress_revoke(egress, EGRESS_SCOPE_ORGANISM, PARTNER), 0);
}

int main(void) {
        /* First, while single-threaded: the test's own network. */
        if (testnet_enter(&no_net) < 0 && !no_net)
                no_net = strdup("cannot make the test's private network");
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_npm_install),
                cmocka_unit_test(test_policy_per_profile),
                cmocka_unit_test(test_live_fetch),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
