/* SPDX-License-Identifier: MIT */
/* static.c — serves the dashboard's own files from one folder and nothing else. */
#include "web-int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATIC_FILE_MAX (8u << 20)

static const struct {
    const char *ext;
    const char *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
};

const char *tb__web_content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < TB_ARRAY_SIZE(types); i++)
            if (!strcmp(dot, types[i].ext))
                return types[i].type;
    return "application/octet-stream";
}

/* The decoded path must be a plain relative name: segments of [A-Za-z0-9._-],
 * none of them empty, "." or "..". Everything else — traversal, encoded or
 * not, backslashes, NULs, absolute paths after decoding ("//etc") — is refused
 * before the file system is asked anything. */
static bool path_ok(const char *p)
{
    if (*p != '/')
        return false;
    p++;
    const char *seg = p;
    for (;; p++) {
        if (*p == '/' || *p == '\0') {
            size_t n = (size_t)(p - seg);
            if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                return false;
            if (*p == '\0')
                return true;
            seg = p + 1;
            continue;
        }
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
}

void tb__web_static(struct tb_web *w, struct tb_http_conn *c, const char *raw_path)
{
    char dec[TB_HTTP_URL_MAX + 16];
    if (tb_http_unescape(raw_path, strlen(raw_path), dec, sizeof dec - 16, false) < 0) {
        tb_http_error(c, 400, "malformed path");
        return;
    }
    size_t n = strlen(dec);
    if (n && dec[n - 1] == '/')
        strcat(dec, "index.html");
    if (strstr(dec, "..") || strchr(dec, '\\')) {
        tb_http_error(c, 400, "path traversal refused");
        return;
    }
    if (!path_ok(dec)) {
        tb_http_error(c, 404, "not found");
        return;
    }
    char full[PATH_MAX], real[PATH_MAX];
    if ((size_t)snprintf(full, sizeof full, "%s%s", w->static_root, dec) >= sizeof full ||
        !realpath(full, real)) {
        tb_http_error(c, 404, "not found");
        return;
    }
    /* A symlink inside the folder may point anywhere; only what resolves
     * inside the (resolved) root is served. */
    size_t rl = strlen(w->static_root);
    if (strncmp(real, w->static_root, rl) != 0 || real[rl] != '/') {
        tb_http_error(c, 404, "not found");
        return;
    }
    /* O_NONBLOCK: opening a FIFO (or a device) for reading would otherwise
     * wait for a writer, holding the loop — every client, and the signal
     * that should stop the server — for good. Only a regular file, checked
     * on the descriptor itself (no race with a rename), is read; reads of a
     * regular file ignore the flag. */
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > STATIC_FILE_MAX) {
        if (fd >= 0)
            close(fd);
        tb_http_error(c, 404, "not found");
        return;
    }
    size_t size = (size_t)sb.st_size;
    char *body = malloc(size ? size : 1);
    size_t got = 0;
    while (body && got < size) {
        ssize_t r = read(fd, body + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!body || got != size) {
        free(body);
        tb_http_error(c, 500, "cannot read file");
        return;
    }
    tb_http_respond_owned(c, 200, tb__web_content_type(real), body, size, NULL);
}
