/* SPDX-License-Identifier: MIT */
/* test_web_http.c — the dashboard's HTTP core on a loopback port: keep-alive,
 * pipelining, limits, malformed input, idle timeout, connection cap, static
 * file confinement, event streams and the URL/JSON helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "http-int.h"
#include "web-int.h"

/* The server runs on its own loop thread; the test talks to it over blocking
 * sockets and asks the loop to do things through an async handle. */
struct fixture {
    uv_loop_t loop;
    uv_async_t cmd;
    pthread_t thread;
    struct tb_http *srv;
    struct tb_web web; /* only its static_root is used by tb__web_static */
    char root[256], outside[256];
    int port;
    volatile int what; /* 1 = broadcast, 2 = stop */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

/* A deferred answer, sent 100 ms later from a timer (as a worker would). */
struct slow {
    uv_timer_t t;
    struct tb_http_conn *c;
};

static void on_slow_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_slow(uv_timer_t *t)
{
    struct slow *sl = t->data;
    if (tb_http_conn_alive(sl->c))
        tb_http_respond(sl->c, 200, "text/plain", "slow done", 9, NULL);
    tb_http_release(sl->c);
    uv_close((uv_handle_t *)&sl->t, on_slow_closed);
}

static void handler(void *ud, struct tb_http_conn *c, const struct tb_http_req *r)
{
    struct fixture *f = ud;
    if (!strcmp(r->path, "/slow")) {
        struct slow *sl = calloc(1, sizeof *sl);
        assert_non_null(sl);
        sl->c = c;
        uv_timer_init(&f->loop, &sl->t);
        sl->t.data = sl;
        tb_http_defer(c);
        uv_timer_start(&sl->t, on_slow, 100, 0);
        return;
    }
    if (!strcmp(r->path, "/hello")) {
        if (r->method == TB_HTTP_OTHER) {
            tb_http_error(c, 405, "method not allowed");
            return;
        }
        char body[128];
        int n = snprintf(body, sizeof body, "hello %s", r->query ? r->query : "-");
        tb_http_respond(c, 200, "text/plain", body, (size_t)n, NULL);
    } else if (!strcmp(r->path, "/stream")) {
        tb_http_stream_begin(c);
    } else {
        tb__web_static(&f->web, c, r->path);
    }
}

static void on_cmd(uv_async_t *a)
{
    struct fixture *f = a->data;
    pthread_mutex_lock(&f->mu);
    if (f->what == 1) {
        tb_http_broadcast(f->srv, "window", "{\"load\":3}");
    } else if (f->what == 2) {
        tb_http_close(f->srv);
        uv_close((uv_handle_t *)&f->cmd, NULL);
    }
    f->what = 0;
    f->done = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void command(struct fixture *f, int what)
{
    pthread_mutex_lock(&f->mu);
    f->done = false;
    f->what = what;
    uv_async_send(&f->cmd);
    while (!f->done)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void *loop_main(void *arg)
{
    struct fixture *f = arg;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->root, sizeof f->root, "/tmp/tbweb-%d-root", (int)getpid());
    snprintf(f->outside, sizeof f->outside, "/tmp/tbweb-%d-secret", (int)getpid());
    mkdir(f->root, 0755);
    char p[512];
    snprintf(p, sizeof p, "%s/index.html", f->root);
    write_file(p, "<!doctype html><title>t</title>");
    snprintf(p, sizeof p, "%s/app.js", f->root);
    write_file(p, "console.log(1);");
    /* 4 MiB: more than the socket buffers hold, so writing it outlasts a
     * client that hangs up at once. */
    snprintf(p, sizeof p, "%s/big.txt", f->root);
    FILE *bf = fopen(p, "w");
    assert_non_null(bf);
    for (int i = 0; i < 4 << 10; i++)
        fprintf(bf, "%01023d\n", i);
    fclose(bf);
    snprintf(p, sizeof p, "%s/fifo.txt", f->root);
    unlink(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    write_file(f->outside, "secret");
    snprintf(p, sizeof p, "%s/escape.txt", f->root);
    unlink(p);
    assert_int_equal(symlink(f->outside, p), 0);
    assert_non_null(realpath(f->root, f->web.static_root));

    assert_int_equal(uv_loop_init(&f->loop), 0);
    uv_async_init(&f->loop, &f->cmd, on_cmd);
    f->cmd.data = f;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    static const char *const hosts[] = {"x"};
    struct tb_http_opts o = {.listen = "127.0.0.1:0", .max_conns = 8, .idle_ms = 400,
                             .request_ms = 600, .allow_hosts = hosts, .nallow_hosts = 1};
    char err[256];
    assert_int_equal(tb_http_new(&f->srv, &f->loop, &o, handler, f, err, sizeof err), 0);
    f->port = tb_http_port(f->srv);
    assert_true(f->port > 0);
    pthread_create(&f->thread, NULL, loop_main, f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    command(f, 2);
    pthread_join(f->thread, NULL);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    char p[512];
    snprintf(p, sizeof p, "%s/index.html", f->root);
    unlink(p);
    snprintf(p, sizeof p, "%s/app.js", f->root);
    unlink(p);
    snprintf(p, sizeof p, "%s/escape.txt", f->root);
    unlink(p);
    snprintf(p, sizeof p, "%s/big.txt", f->root);
    unlink(p);
    snprintf(p, sizeof p, "%s/fifo.txt", f->root);
    unlink(p);
    rmdir(f->root);
    unlink(f->outside);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
    return 0;
}

static int dial(struct fixture *f)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_str(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the server may close early on purpose */
        s += w;
        n -= (size_t)w;
    }
}

/* Reads until `want` complete responses arrived, EOF, or 2 s of silence.
 * Returns the bytes read; *eof tells whether the server closed. */
static size_t recv_responses(int fd, char *buf, size_t cap, int want, bool *eof)
{
    size_t len = 0;
    *eof = false;
    for (int spins = 0; spins < 200; spins++) {
        int got = 0;
        const char *p = buf;
        buf[len] = '\0';
        while (got < want) {
            const char *h = strstr(p, "\r\n\r\n");
            if (!h)
                break;
            const char *cl = strstr(p, "Content-Length: ");
            long n = cl && cl < h ? strtol(cl + 16, NULL, 10) : 0;
            if ((size_t)(h + 4 - buf) + (size_t)n > len)
                break;
            p = h + 4 + n;
            got++;
        }
        if (got >= want)
            return len;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 2000) <= 0)
            return len;
        ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
        if (r <= 0) {
            *eof = true;
            buf[len] = '\0';
            return len;
        }
        len += (size_t)r;
    }
    return len;
}

/* True when the server closes the connection within 3 s. */
static bool closes(int fd)
{
    char tmp[4096];
    for (int i = 0; i < 100; i++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 3000) <= 0)
            return false;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0)
            return true;
    }
    return false;
}

static int status_of(const char *resp)
{
    int st = 0;
    if (sscanf(resp, "HTTP/1.1 %d", &st) != 1)
        return -1;
    return st;
}

static int one_request(struct fixture *f, const char *req, char *out, size_t cap, bool *eof)
{
    int fd = dial(f);
    send_str(fd, req, strlen(req));
    recv_responses(fd, out, cap, 1, eof);
    int st = status_of(out);
    if (!*eof)
        *eof = closes(fd);
    close(fd);
    return st;
}

static void test_keepalive_and_pipelining(void **state)
{
    struct fixture *f = *state;
    int fd = dial(f);
    static char buf[65536];
    bool eof;
    const char *r1 = "GET /hello?a=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r1, strlen(r1));
    recv_responses(fd, buf, sizeof buf, 1, &eof);
    assert_int_equal(status_of(buf), 200);
    assert_non_null(strstr(buf, "Connection: keep-alive"));
    assert_non_null(strstr(buf, "hello a=1"));
    assert_false(eof);
    /* Same connection, three pipelined requests in one write. */
    const char *r3 = "GET /hello?b HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?c HTTP/1.1\r\nHost: x\r\n\r\n"
                     "HEAD /hello?d HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r3, strlen(r3));
    size_t n = recv_responses(fd, buf, sizeof buf, 2, &eof);
    assert_true(n > 0);
    char *second = strstr(buf, "hello b");
    assert_non_null(second);
    assert_non_null(strstr(second, "hello c"));
    close(fd);
    /* HTTP/1.0 without keep-alive closes after the response. */
    assert_int_equal(one_request(f, "GET /hello HTTP/1.0\r\n\r\n", buf, sizeof buf, &eof), 200);
    assert_true(eof);
}

static void test_bad_requests(void **state)
{
    struct fixture *f = *state;
    static char buf[65536], big[32768];
    bool eof;
    /* Non-GET: 405 with Allow. */
    assert_int_equal(one_request(f, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
                                 buf, sizeof buf, &eof), 405);
    assert_non_null(strstr(buf, "Allow: GET, HEAD"));
    /* Garbage: 400, then the connection ends. */
    assert_int_equal(one_request(f, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
                                 buf, sizeof buf, &eof), 400);
    assert_true(eof);
    assert_non_null(strstr(buf, "{\"error\""));
    /* Oversized head: 431. */
    int o = snprintf(big, sizeof big, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad: ");
    memset(big + o, 'a', 12000);
    strcpy(big + o + 12000, "\r\n\r\n");
    assert_int_equal(one_request(f, big, buf, sizeof buf, &eof), 431);
    assert_true(eof);
    /* Many small headers add up too. */
    o = snprintf(big, sizeof big, "GET /hello HTTP/1.1\r\n");
    for (int i = 0; i < 900; i++)
        o += snprintf(big + o, sizeof big - (size_t)o, "X-%d: v\r\n", i);
    snprintf(big + o, sizeof big - (size_t)o, "\r\n");
    assert_int_equal(one_request(f, big, buf, sizeof buf, &eof), 431);
    /* Too long a URL: 414. */
    o = snprintf(big, sizeof big, "GET /");
    memset(big + o, 'u', 5000);
    strcpy(big + o + 5000, " HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(one_request(f, big, buf, sizeof buf, &eof), 414);
    /* Announced body beyond the limit: 413 before it is read. */
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", buf,
                                 sizeof buf, &eof), 413);
    /* The server is still fine afterwards. */
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf,
                                 sizeof buf, &eof), 200);
}

static void test_static_confinement(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    assert_int_equal(one_request(f, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf, &eof), 200);
    assert_non_null(strstr(buf, "Content-Type: text/html"));
    assert_non_null(strstr(buf, "<title>t</title>"));
    assert_int_equal(one_request(f, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf, &eof), 200);
    assert_non_null(strstr(buf, "Content-Type: text/javascript"));
    assert_int_equal(one_request(f, "GET /nope.css HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf, &eof), 404);
    const char *bad400[] = {
        "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /%2E%2E%2Fetc%2Fpasswd HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /..%5c..%5cetc HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a/%2e%2e/index.html HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /index.html%00.js HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(bad400); i++) {
        int st = one_request(f, bad400[i], buf, sizeof buf, &eof);
        if (st != 400)
            fail_msg("%s -> %d, want 400", bad400[i], st);
        assert_null(strstr(buf, "secret"));
    }
    const char *bad404[] = {
        "GET //etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /escape.txt HTTP/1.1\r\nHost: x\r\n\r\n", /* symlink out of the root */
        "GET /%2fetc%2fpasswd HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /.hidden HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(bad404); i++) {
        int st = one_request(f, bad404[i], buf, sizeof buf, &eof);
        if (st != 404)
            fail_msg("%s -> %d, want 404", bad404[i], st);
        assert_null(strstr(buf, "secret"));
    }
}

static void test_idle_timeout(void **state)
{
    struct fixture *f = *state;
    int fd = dial(f);
    /* idle_ms is 400 in this fixture: a silent client is dropped. */
    assert_true(closes(fd));
    close(fd);
}

static void test_connection_cap(void **state)
{
    struct fixture *f = *state;
    int fds[40];
    for (size_t i = 0; i < TB_ARRAY_SIZE(fds); i++)
        fds[i] = dial(f);
    usleep(100 * 1000);
    static char buf[65536];
    bool eof;
    /* 40 idle sockets against a cap of 8: the newest real request wins. */
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf,
                                 &eof), 200);
    assert_true(tb_http_conn_count(f->srv) <= 8);
    for (size_t i = 0; i < TB_ARRAY_SIZE(fds); i++)
        close(fds[i]);
}

static void test_event_stream(void **state)
{
    struct fixture *f = *state;
    int fd = dial(f);
    const char *r = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r, strlen(r));
    static char buf[8192];
    size_t len = 0;
    for (int i = 0; i < 50 && !strstr(buf, "retry:"); i++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        assert_true(poll(&pfd, 1, 2000) > 0);
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        assert_true(n > 0);
        len += (size_t)n;
        buf[len] = '\0';
    }
    assert_non_null(strstr(buf, "Content-Type: text/event-stream"));
    /* Streams outlive the idle timeout (400 ms here). */
    usleep(700 * 1000);
    command(f, 1);
    for (int i = 0; i < 50 && !strstr(buf, "event: window"); i++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        assert_true(poll(&pfd, 1, 2000) > 0);
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        assert_true(n > 0);
        len += (size_t)n;
        buf[len] = '\0';
    }
    assert_non_null(strstr(buf, "event: window\ndata: {\"load\":3}\n\n"));
    close(fd);
}

static void test_deferred_order(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    /* A deferred answer and a quick one pipelined behind it: in order. */
    int fd = dial(f);
    const char *r = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?after HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r, strlen(r));
    recv_responses(fd, buf, sizeof buf, 2, &eof);
    char *a = strstr(buf, "slow done"), *b = strstr(buf, "hello after");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    /* The connection is still usable afterwards. */
    const char *r2 = "GET /hello?again HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r2, strlen(r2));
    recv_responses(fd, buf, sizeof buf, 1, &eof);
    assert_non_null(strstr(buf, "hello again"));
    close(fd);
    /* A client that leaves before its deferred answer: nothing breaks. */
    fd = dial(f);
    const char *r3 = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r3, strlen(r3));
    close(fd);
    usleep(300 * 1000);
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf,
                                 sizeof buf, &eof), 200);
}

/* Mutated requests (byte flips, insertions of CR/LF/NUL/'%', truncations,
 * repeats) on fresh connections, and split at random points on one more: the
 * server answers or closes each, never crashes (the ASan build runs this too),
 * and a normal request still works afterwards. */
static void test_mutations(void **state)
{
    struct fixture *f = *state;
    static const char base[] = "GET /hello?tier=mysql&width=50ms HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "4\r\nabcd\r\n0\r\n\r\nGET /%2e%2e/index.html HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char inject[] = {'\r', '\n', '\0', '%', ' ', ':', '/', '.', (char)0xff};
    uint64_t x = 0x9e3779b97f4a7c15u;
    static char req[4096], buf[65536];
    for (int round = 0; round < 300; round++) {
        size_t n = sizeof base - 1;
        memcpy(req, base, n);
        int edits = 1 + round % 6;
        for (int e = 0; e < edits; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x % n);
            switch ((x >> 32) % 4) {
            case 0: req[at] = (char)(x >> 40); break;
            case 1: req[at] = inject[(x >> 40) % sizeof inject]; break;
            case 2: n = at + 1; break;
            case 3:
                if (n + 64 < sizeof req) {
                    memmove(req + at + 64, req + at, n - at);
                    memset(req + at, 'A' + (int)((x >> 48) % 26), 64);
                    n += 64;
                }
                break;
            }
        }
        int fd = dial(f);
        send_str(fd, req, n);
        shutdown(fd, SHUT_WR);
        closes(fd);
        close(fd);
    }
    /* One connection, the valid request twice, written in random pieces. */
    int fd = dial(f);
    const char *ok = "GET /hello?p HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?q HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t len = strlen(ok), o = 0;
    while (o < len) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = TB_MIN(len - o, 1 + (size_t)(x % 7));
        send_str(fd, ok + o, k);
        o += k;
        usleep(2000);
    }
    bool eof;
    recv_responses(fd, buf, sizeof buf, 2, &eof);
    assert_non_null(strstr(buf, "hello p"));
    assert_non_null(strstr(buf, "hello q"));
    close(fd);
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf,
                                 sizeof buf, &eof), 200);
}

/* Finding 1 of issue 13: a client that hangs up while its answers are being
 * written made write(2) raise SIGPIPE, which killed the process. Two
 * pipelined requests for a file larger than the socket buffers, then a
 * reset: the server must live on (this test process is the server). */
static void test_sigpipe(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    for (int round = 0; round < 5; round++) {
        int fd = dial(f);
        const char *r = "GET /big.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /big.txt HTTP/1.1\r\nHost: x\r\n\r\n";
        send_str(fd, r, strlen(r));
        /* Read a little, so the server is mid-write, then reset. */
        recv(fd, buf, 100, 0);
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
        usleep(50 * 1000);
    }
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 buf, sizeof buf, &eof), 200);
    struct sigaction sa;
    sigaction(SIGPIPE, NULL, &sa);
    assert_true(sa.sa_handler == SIG_IGN);
}

/* Finding 2: pipelined deferred (API-like) requests whose last one says
 * "Connection: close" get every answer, in order, and then the close. */
static void test_pipelined_close(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    int fd = dial(f);
    const char *r = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?mid HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_str(fd, r, strlen(r));
    size_t n = recv_responses(fd, buf, sizeof buf, 3, &eof);
    assert_true(n > 0);
    char *a = strstr(buf, "slow done"), *b = strstr(buf, "hello mid");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_non_null(strstr(b, "slow done"));
    assert_true(eof || closes(fd));
    close(fd);
}

/* Finding 3: a thousand connections, each with a complete request, against
 * a cap of 8 slots: every request is answered (200, or 503), none is
 * closed unanswered. Half ask to close, half keep the connection open. */
static void test_burst(void **state)
{
    struct fixture *f = *state;
    enum { N = 1000 };
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    assert_true(rl.rlim_cur > N + 64);
    static int fd[N];
    static bool sent[N], done[N];
    static int status[N];
    static char in[N][512];
    static size_t inlen[N];
    static struct pollfd pfd[N];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < N; i++) {
        fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(fd[i] >= 0);
        int rc = connect(fd[i], (struct sockaddr *)&a, sizeof a);
        assert_true(rc == 0 || errno == EINPROGRESS);
        sent[i] = done[i] = false;
        status[i] = 0;
        inlen[i] = 0;
    }
    int left = N;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        for (int i = 0; i < N; i++) {
            pfd[i].fd = done[i] ? -1 : fd[i];
            pfd[i].events = sent[i] ? POLLIN : POLLOUT;
            pfd[i].revents = 0;
        }
        int k = poll(pfd, N, 1000);
        assert_true(k >= 0);
        for (int i = 0; i < N; i++) {
            if (done[i] || !pfd[i].revents)
                continue;
            if (!sent[i]) {
                char req[128];
                int len = snprintf(req, sizeof req, "GET /hello?%d HTTP/1.1\r\nHost: x\r\n%s\r\n",
                                   i, i % 2 ? "Connection: close\r\n" : "");
                ssize_t w = send(fd[i], req, (size_t)len, MSG_NOSIGNAL);
                if (w < 0 && (errno == EAGAIN || errno == EINPROGRESS))
                    continue;
                assert_int_equal(w, len);
                sent[i] = true;
                continue;
            }
            ssize_t r = recv(fd[i], in[i] + inlen[i], sizeof in[i] - 1 - inlen[i], 0);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r > 0)
                inlen[i] += (size_t)r;
            in[i][inlen[i]] = '\0';
            char *body = strstr(in[i], "\r\n\r\n");
            if (r <= 0 || (body && (strstr(body, "hello") || strstr(body, "error")))) {
                status[i] = status_of(in[i]);
                done[i] = true;
                left--;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (t1.tv_sec - t0.tv_sec > 60)
            break;
    }
    int ok = 0, busy = 0, other = 0;
    for (int i = 0; i < N; i++) {
        if (status[i] == 200) {
            char want[32];
            snprintf(want, sizeof want, "hello %d", i);
            assert_non_null(strstr(in[i], want));
            ok++;
        } else if (status[i] == 503) {
            busy++;
        } else {
            other++;
        }
        close(fd[i]);
    }
    print_message("burst: %d answered 200, %d 503, %d unanswered\n", ok, busy, other);
    assert_int_equal(other, 0);
    assert_int_equal(ok + busy, N);
    struct tb_http_stats st;
    tb_http_stats(f->srv, &st);
    assert_true(st.accepted >= (uint64_t)N);
}

/* Finding 4: a FIFO inside the static folder made open(2) block the loop for
 * good (and SIGTERM with it). It must be a quick 404. */
static void test_fifo(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    int fd = dial(f);
    const char *r = "GET /fifo.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    send_str(fd, r, strlen(r));
    buf[0] = '\0';
    recv_responses(fd, buf, sizeof buf, 1, &eof);
    int st = status_of(buf);
    /* Unblock a server stuck in open() before judging, so the test ends. */
    char p[512];
    snprintf(p, sizeof p, "%s/fifo.txt", f->root);
    int w = open(p, O_WRONLY | O_NONBLOCK);
    if (w >= 0)
        close(w);
    close(fd);
    assert_int_equal(st, 404);
    assert_int_equal(one_request(f, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 buf, sizeof buf, &eof), 200);
}

/* Finding 8: strict parsing (RFC 9112) and the Host allow-list. */
static void test_strict(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    static const struct {
        const char *req;
        int status;
    } cases[] = {
        {"GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\nHost: x\n\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\n\r\n", 400},
        {"GET /hello HTTP/9.9\r\nHost: x\r\n\r\n", 505},
        {"GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", 505},
        {"GET /hello HTTP/1.10\r\nHost: x\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400},
        {" GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET  /hello HTTP/1.1\r\nHost: x\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\n X-Fold: y\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nX: a\x01\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
        {"GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
        {"GET /hello HTTP/1.1\r\nHost: x y\r\n\r\n", 400},
        {"\x16\x03\x01\x02\x00\x01", 400}, /* TLS, no line end: refused at once */
        {"GET /hello HTTP/1.1\r\nHost: evil.example\r\n\r\n", 403},
        {"GET /hello HTTP/1.1\r\nHost: localhost.evil.example:80\r\n\r\n", 403},
        {"GET http://evil.example/hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 403},
        {"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", 200},
        {"GET /hello HTTP/1.1\r\nHost: X.\r\n\r\n", 200},
        {"GET /hello HTTP/1.1\r\nHost: localhost:8080\r\n\r\n", 200},
        {"GET /hello HTTP/1.1\r\nHost: app.localhost\r\n\r\n", 200},
        {"GET /hello HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", 200},
        {"GET /hello HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 200},
        {"GET /hello HTTP/1.1\r\nHost: 192.0.2.7\r\n\r\n", 200},
        {"GET http://127.0.0.1:9/hello?abs HTTP/1.1\r\nHost: evil.example\r\n\r\n", 200},
        {"GET /hello HTTP/1.0\r\n\r\n", 200},
        {"\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n", 200},
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(cases); i++) {
        int st = one_request(f, cases[i].req, buf, sizeof buf, &eof);
        if (st != cases[i].status)
            fail_msg("case %zu (%.40s...) -> %d, want %d", i, cases[i].req, st, cases[i].status);
    }
    one_request(f, "GET http://127.0.0.1:9/hello?abs HTTP/1.1\r\nHost: evil.example\r\n\r\n", buf,
                sizeof buf, &eof);
    assert_non_null(strstr(buf, "hello abs"));
    /* Every answer carries the browser-side protections. */
    one_request(f, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf, &eof);
    assert_non_null(strstr(buf, "\r\nContent-Security-Policy: default-src 'self';"));
    assert_non_null(strstr(buf, "frame-ancestors 'none'"));
    assert_non_null(strstr(buf, "\r\nX-Content-Type-Options: nosniff\r\n"));
    assert_non_null(strstr(buf, "\r\nX-Frame-Options: DENY\r\n"));
}

/* A request that trickles in (slowloris) is answered 408 after request_ms
 * (600 ms here) from its first byte, however often bytes come. */
static void test_slow_request(void **state)
{
    struct fixture *f = *state;
    static char buf[65536];
    bool eof;
    int fd = dial(f);
    const char *part = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    send_str(fd, part, strlen(part));
    for (int i = 0; i < 12; i++) {
        send_str(fd, "a", 1);
        usleep(100 * 1000);
    }
    recv_responses(fd, buf, sizeof buf, 1, &eof);
    assert_int_equal(status_of(buf), 408);
    assert_true(eof || closes(fd));
    close(fd);
}

static void test_parse_head(void **state)
{
    (void)state;
    struct tb_http_head h;
    const char *r = "GET /a?b=1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nxyz";
    assert_int_equal(tb_http_parse_head(r, strlen(r), &h), (long)strlen(r) - 3);
    assert_int_equal(h.method, TB_HTTP_GET);
    assert_int_equal(h.target_len, 6);
    assert_memory_equal(h.target, "/a?b=1", 6);
    assert_int_equal(h.content_length, 3);
    assert_true(h.keep_alive);
    /* Every proper prefix of a valid head asks for more bytes. */
    for (size_t n = 0; n < strlen(r) - 3; n++)
        assert_int_equal(tb_http_parse_head(r, n, &h), 0);
    assert_int_equal(tb_http_parse_head("GE\x01", 3, &h), -400);
    assert_int_equal(tb_http_parse_head("GET /x HTTP/1.0\r\n\r\n", 19, &h), 19);
    assert_false(h.keep_alive);
    r = "GET /x HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
    assert_int_equal(tb_http_parse_head(r, strlen(r), &h), (long)strlen(r));
    assert_true(h.keep_alive);
    r = "GET /x HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n";
    assert_int_equal(tb_http_parse_head(r, strlen(r), &h), (long)strlen(r));
    assert_false(h.keep_alive);
    static char big[TB_HTTP_URL_MAX + 64];
    memcpy(big, "GET /", 5);
    memset(big + 5, 'u', TB_HTTP_URL_MAX);
    assert_int_equal(tb_http_parse_head(big, 5 + TB_HTTP_URL_MAX, &h), -414);
    /* The same answer whole or in pieces: a target past the limit ended by a
     * bare CR is 414 as soon as the target has arrived, and 414 whole (it
     * was 400 whole: fuzz_http_parse, crash-414-then-bare-cr). */
    memcpy(big + 5 + TB_HTTP_URL_MAX, " HTTP/1.1\r\r\n\r\n", 15);
    assert_int_equal(tb_http_parse_head(big, 5 + TB_HTTP_URL_MAX + 15, &h), -414);
    memcpy(big + 5 + 10, " HTTP/1.1\r\r\n\r\n", 15);
    assert_int_equal(tb_http_parse_head(big, 5 + 10 + 15, &h), -400);

    static const char *const extra[] = {"dash.example.org"};
    assert_true(tb_http_host_allowed("127.0.0.1:8080", 14, NULL, 0));
    assert_true(tb_http_host_allowed("[::1]", 5, NULL, 0));
    assert_true(tb_http_host_allowed("LocalHost", 9, NULL, 0));
    assert_true(tb_http_host_allowed("a.b.localhost.:1", 16, NULL, 0));
    assert_false(tb_http_host_allowed("localhost.evil", 14, NULL, 0));
    assert_false(tb_http_host_allowed("dash.example.org", 16, NULL, 0));
    assert_true(tb_http_host_allowed("Dash.Example.org:443", 20, extra, 1));
    assert_false(tb_http_host_allowed("example.org", 11, extra, 1));
    assert_false(tb_http_host_allowed("[evil]", 6, NULL, 0));
    assert_false(tb_http_host_allowed("", 0, NULL, 0));
}

static void test_helpers(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(tb_http_unescape("a%20b+c", 7, out, sizeof out, true), 5);
    assert_string_equal(out, "a b c");
    assert_int_equal(tb_http_unescape("%2", 2, out, sizeof out, false), -1);
    assert_int_equal(tb_http_unescape("%00", 3, out, sizeof out, false), -1);
    assert_int_equal(tb_http_query_get("tier=mysql&width=50ms", "width", out, sizeof out), 1);
    assert_string_equal(out, "50ms");
    assert_int_equal(tb_http_query_get("tier=mysql&width=50ms", "wid", out, sizeof out), 0);
    assert_int_equal(tb_http_query_get("tier=%zz", "tier", out, sizeof out), -1);
    assert_int_equal(tb_http_query_get("flag&x=1", "flag", out, sizeof out), 1);
    assert_string_equal(out, "");

    struct sockaddr_in s4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.1.2.3", &s4.sin_addr);
    assert_true(tb_http_addr_is_loopback((struct sockaddr *)&s4));
    inet_pton(AF_INET, "10.0.0.1", &s4.sin_addr);
    assert_false(tb_http_addr_is_loopback((struct sockaddr *)&s4));
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::1", &s6.sin6_addr);
    assert_true(tb_http_addr_is_loopback((struct sockaddr *)&s6));
    inet_pton(AF_INET6, "::", &s6.sin6_addr);
    assert_false(tb_http_addr_is_loopback((struct sockaddr *)&s6));
}

static void dummy(void *ud, struct tb_http_conn *c, const struct tb_http_req *r)
{
    (void)ud;
    (void)r;
    tb_http_error(c, 404, "x");
}

static void test_listen_policy(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct tb_http *srv = NULL;
    char err[256];
    struct tb_http_opts o = {.listen = "0.0.0.0:0"};
    assert_int_equal(tb_http_new(&srv, &loop, &o, dummy, NULL, err, sizeof err), TB_E_PERM);
    assert_non_null(strstr(err, "--allow-remote"));
    o.listen = "127.0.0.1:99999";
    assert_int_equal(tb_http_new(&srv, &loop, &o, dummy, NULL, err, sizeof err), TB_E_INVAL);
    o.listen = "nonsense";
    assert_int_equal(tb_http_new(&srv, &loop, &o, dummy, NULL, err, sizeof err), TB_E_INVAL);
    o.listen = "0.0.0.0:0";
    o.allow_remote = true;
    assert_int_equal(tb_http_new(&srv, &loop, &o, dummy, NULL, err, sizeof err), 0);
    tb_http_close(srv);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keepalive_and_pipelining, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_confinement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mutations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigpipe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_burst, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_request, setup, teardown),
        cmocka_unit_test(test_parse_head),
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_listen_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
