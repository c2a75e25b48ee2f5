/* fuzz-knowledge.c — the control plane's reading of the files the model
 * writes into knowledge/ and skills/ (and the owner's seed.yaml), end to end:
 * the bytes are written into a Seed folder of the target's own (a temporary
 * directory made once) and read back through the API's own functions
 * (kernel/api/self.c) and the logo reader (kernel/ctl/logo.c), as the routes
 * read them.
 *
 * The first byte chooses:
 *   0  the rest is knowledge/self.yaml: GET identity
 *   1  "REL\nCONTENT": CONTENT is knowledge/note.md, REL the path asked for
 *      (GET knowledge?path=REL, and the listing)
 *   2  the rest is skills/s/SKILL.md: GET skills and skills/s
 *   3  the rest is seed.yaml: GET settings
 *   4  the rest is knowledge/logo.png (5: logo.svg): GET /_seed/logo
 * Every answer is one of the documented ones and valid JSON; the identity's
 * accent is a colour or null; a file is shown as it is, or with content null
 * when it is not text; settings never show the database URL nor a base_url's
 * user info or query; a PNG logo starts with the PNG signature. */
#include "api/self.h"
#include "config/config.h"
#include "ctl/logo.h"
#include "fsx/fsx.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/stat.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static char dir[] = "/tmp/fuzz-knowledge-XXXXXX";

static void put(const char *rel, const void *data, size_t size) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        check(fd >= 0);
        while (size > 0) {
                ssize_t k = write(fd, data, size);
                check(k > 0);
                data = (const char *)data + k;
                size -= (size_t)k;
        }
        close(fd);
}

static const char *const files[] = {"knowledge/self.yaml", "knowledge/note.md", "knowledge/logo.png",
                                    "knowledge/logo.svg", "skills/s/SKILL.md", "seed.yaml"};
static const char *const sub[] = {"skills/s", "skills", "knowledge", ""};

static void remove_folder(void) {
        char path[256];
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                snprintf(path, sizeof path, "%s/%s", dir, files[i]);
                (void)unlink(path);
        }
        for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
                snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
                (void)rmdir(path);
        }
}

static void make_folder(void) {
        static bool made;
        if (made)
                return;
        check(mkdtemp(dir));
        check(atexit(remove_folder) == 0);
        char path[256];
        for (size_t i = ARRAY_SIZE(sub) - 1; i-- > 0;) {
                snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
                check(mkdir(path, 0755) == 0);
        }
        made = true;
}

/* A JSON object, as the routes answer. */
static json_t *answer(int r, char *json) {
        check(r == 0 && json);
        json_t *o = json_loads(json, 0, NULL);
        check(json_is_object(o));
        free(json);
        return o;
}

/* The errors the routes answer with a 4xx (kernel/api/self.c reply_json). */
static bool file_error(int r) {
        return r == -ENOENT || r == -EINVAL || r == -ELOOP || r == -EXDEV || r == -EMLINK || r == -EFBIG ||
               r == -EISDIR || r == -EPERM || r == -ENOTDIR || r == -ENAMETOOLONG || r == -ENOMEM;
}

static void identity(const uint8_t *data, size_t size) {
        put("knowledge/self.yaml", data, size);
        char *json = NULL;
        int r = api_self_identity_json(dir, &json);
        if (r == -ENOMEM)
                return;
        json_t *o = answer(r, json);
        json_t *accent = json_object_get(o, "accent");
        check(json_is_null(accent) || api_self_accent_valid(json_string_value(accent)));
        const char *keys[] = {"slug", "name", "tagline", "purpose"};
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                json_t *v = json_object_get(o, keys[i]);
                check(json_is_null(v) || (json_is_string(v) && json_string_length(v) <= API_SELF_VALUE_MAX));
        }
        json_decref(o);
}

static void note(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t rl = nl ? (size_t)(nl - data) : size;
        char *rel = strndup((const char *)data, rl);
        check(rel);
        const uint8_t *content = nl ? nl + 1 : data + size;
        size_t n = (size_t)(data + size - content);
        put("knowledge/note.md", content, n);
        char *json = NULL;
        int r = api_self_knowledge_file_json(dir, rel, &json);
        if (r < 0)
                check(file_error(r));
        else {
                json_t *o = answer(r, json);
                const char *path = json_string_value(json_object_get(o, "path"));
                check(path && path[0] != '/' && !strstr(path, ".."));
                json_t *c = json_object_get(o, "content");
                if (streq(path, "note.md")) {
                        check(json_integer_value(json_object_get(o, "size")) == (json_int_t)n);
                        check(json_is_null(c) || (json_string_length(c) == n && !memcmp(json_string_value(c), content, n)));
                }
                json_decref(o);
        }
        json = NULL;
        r = api_self_knowledge_json(dir, &json);
        if (r != -ENOMEM)
                json_decref(answer(r, json));
        free(rel);
}

static void skill(const uint8_t *data, size_t size) {
        put("skills/s/SKILL.md", data, size);
        char *json = NULL;
        int r = api_self_skills_json(dir, &json);
        if (r != -ENOMEM) {
                json_t *o = answer(r, json);
                check(json_array_size(json_object_get(o, "skills")) == 1);
                json_decref(o);
        }
        json = NULL;
        r = api_self_skill_json(dir, "s", &json);
        if (r < 0)
                check(file_error(r));
        else {
                json_t *o = answer(r, json);
                check(json_integer_value(json_object_get(o, "size")) == (json_int_t)size);
                json_decref(o);
        }
}

static void settings(const uint8_t *data, size_t size) {
        put("seed.yaml", data, size);
        char *json = NULL;
        int r = api_self_settings_json(dir, &json);
        if (r < 0) {
                check(r == -EBADMSG || r == -ENOMEM || file_error(r));
                return;
        }
        struct cfg *c = NULL;
        check(cfg_parse((const char *)data, size, "seed.yaml", &c, NULL) == 0);
        if (c->database.url[0])
                check(!strstr(json, c->database.url));
        json_t *o = answer(r, json);
        const char *base = json_string_value(json_object_get(json_object_get(o, "model"), "base_url"));
        check(base);
        const char *auth = strstr(base, "://");
        auth = auth ? auth + 3 : base;
        check(!memchr(auth, '@', strcspn(auth, "/")) && !strpbrk(base, "?#"));
        json_decref(o);
        cfg_free(c);
}

static void logo(const uint8_t *data, size_t size, bool svg) {
        put(svg ? "knowledge/logo.svg" : "knowledge/logo.png", data, size);
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, svg ? "knowledge/logo.png" : "knowledge/logo.svg");
        (void)unlink(path);
        int root = -1;
        check(fsx_open_root(dir, &root) == 0);
        struct ctl_logo l = {0};
        int r = ctl_logo_read(root, svg ? 0 : 1, &l);
        close(root);
        if (r < 0) {
                check(r == -EBADMSG || r == -EFBIG || r == -ENOMEM || file_error(r));
                check(ctl_logo_refusal(r));
                if (r == -EBADMSG)
                        check(!svg && (size < 8 || memcmp(data, "\x89PNG\r\n\x1a\n", 8) != 0));
                return;
        }
        check(l.len == size && (size == 0 || !memcmp(l.data, data, size)));
        check(svg || (size >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)));
        check(streq(l.ctype, svg ? "image/svg+xml" : "image/png"));
        check(strlen(l.etag) == SHA256_HEX_LEN + 2 && l.etag[0] == '"');
        ctl_logo_done(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        make_folder();
        uint8_t mode = data[0] % 6;
        data++;
        size--;
        switch (mode) {
        case 0:
                identity(data, size);
                break;
        case 1:
                note(data, size);
                break;
        case 2:
                skill(data, size);
                break;
        case 3:
                settings(data, size);
                break;
        default:
                logo(data, size, mode == 5);
                break;
        }
        return 0;
}
