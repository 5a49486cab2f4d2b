/* SPDX-License-Identifier: MIT */
/* test_web_live.c — the live pcap source on a libuv loop, on the loopback
 * interface: packets reach the callback with nanosecond kernel timestamps,
 * the BPF filter applies, counters add up, and the errors are the documented
 * ones. Needs root (packet sockets): without it the test exits 77, which
 * meson reports as a skip and scripts/test.sh counts as a failure (cmocka's
 * skip() would exit 0 and read as a pass). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "live.h"

struct seen {
    unsigned packets, marked;
    int64_t first_ts;
    int linktype;
};

static const char MARK[] = "tbneck-live-test-marker";

static void on_packet(void *ud, int linktype, int64_t ts_ns, const uint8_t *data, uint32_t caplen,
                      uint32_t wirelen)
{
    struct seen *s = ud;
    s->packets++;
    s->linktype = linktype;
    if (!s->first_ts)
        s->first_ts = ts_ns;
    assert_true(caplen <= wirelen);
    if (caplen >= sizeof MARK - 1 && memmem(data, caplen, MARK, sizeof MARK - 1))
        s->marked++;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void send_udp(uint16_t port, int n)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < n; i++)
        sendto(fd, MARK, sizeof MARK - 1, 0, (struct sockaddr *)&a, sizeof a);
    close(fd);
}


static void on_stop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Runs the loop for `ms` (the poll handle delivers meanwhile). */
static void run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, on_stop, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void test_capture_loopback(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct seen s = {0};
    struct tb_live *l = NULL;
    char err[256];
    struct tb_live_opts o = {.iface = "lo", .bpf = "udp port 47321", .immediate = true};
    assert_int_equal(tb_live_open(&l, &loop, &o, on_packet, &s, err, sizeof err), 0);
    assert_int_equal(tb_live_start(l), 0);
    int64_t t0 = now_ns();
    send_udp(47321, 5);
    send_udp(47322, 5); /* filtered out */
    run_for(&loop, 300);
    assert_int_equal(s.marked, 5);
    assert_int_equal(s.packets, 5);
    assert_int_equal(tb_live_linktype(l), s.linktype);
    /* Kernel stamps, in ns since the epoch, around the send. */
    assert_true(s.first_ts >= t0 - 1000000000 && s.first_ts <= now_ns());
    struct tb_live_stats st;
    assert_int_equal(tb_live_stats(l, &st), 0);
    assert_true(st.received >= 5);
    assert_int_equal(st.kernel_drops, 0);
    /* Draining with nothing pending is 0 packets, not an error. */
    assert_int_equal(tb_live_drain(l), 0);
    tb_live_close(l);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_errors(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct seen s = {0};
    struct tb_live *l = NULL;
    char err[256];
    struct tb_live_opts o = {.iface = "tbnosuch0"};
    assert_int_equal(tb_live_open(&l, &loop, &o, on_packet, &s, err, sizeof err), TB_E_NOTFOUND);
    assert_non_null(strstr(err, "tbnosuch0"));
    assert_null(strchr(err, '\n'));
    o.iface = "lo";
    o.bpf = "udp port ((";
    assert_int_equal(tb_live_open(&l, &loop, &o, on_packet, &s, err, sizeof err), TB_E_INVAL);
    assert_non_null(strstr(err, "filter"));
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: test_web_live needs root (packet sockets)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_loopback),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
