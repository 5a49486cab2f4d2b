/* SPDX-License-Identifier: MIT */
/* test_flow.c — the flow table: one key for both directions, lookup, growth,
 * least-recently-active order and removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "flow-int.h"
#include "test_pkt.h"

static void test_key_both_directions(void **state)
{
    (void)state;
    struct tb_addr c = tp_addr("10.0.0.9:50000"), s = tp_addr("10.0.0.1:80");
    struct tb_flow_key k1, k2;
    int side1, side2;
    uint32_t h1 = tb_flow_key_make(&k1, &c, &s, &side1);
    uint32_t h2 = tb_flow_key_make(&k2, &s, &c, &side2);
    assert_int_equal(h1, h2);
    assert_memory_equal(&k1, &k2, sizeof k1);
    assert_int_equal(side1, 1 - side2);
    assert_int_equal(k1.port[side1], 50000);
    assert_int_equal(k1.port[side2], 80);
    /* Same addresses, ports decide. */
    struct tb_addr a = tp_addr("10.0.0.1:1000"), b = tp_addr("10.0.0.1:999");
    tb_flow_key_make(&k1, &a, &b, &side1);
    assert_int_equal(side1, 1);
    assert_int_equal(k1.port[0], 999);
    /* Different keys for different tuples. */
    struct tb_addr c2 = tp_addr("10.0.0.9:50001");
    tb_flow_key_make(&k2, &c2, &s, &side2);
    assert_memory_not_equal(&k1, &k2, sizeof k1);
}

static void test_table(void **state)
{
    (void)state;
    struct tb_flow_table t;
    assert_int_equal(tb_flow_table_init(&t), 0);
    enum { N = 5000 };
    static struct tb_flow *flows[N];
    for (int i = 0; i < N; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "192.168.%d.%d:%d", i / 250, i % 250, 1024 + i);
        struct tb_addr c = tp_addr(buf), s = tp_addr("10.0.0.1:3306");
        struct tb_flow_key k;
        int side;
        uint32_t h = tb_flow_key_make(&k, &c, &s, &side);
        assert_null(tb_flow_find(&t, &k, h));
        flows[i] = tb_flow_add(&t, &k, h, 4);
        assert_non_null(flows[i]);
        flows[i]->conn = (uint64_t)i;
    }
    assert_int_equal(t.count, N);
    assert_true(t.nbuckets >= N); /* grew from 1024 */
    assert_int_equal(t.lists[TB_FL_ACTIVE].count, N);
    /* Every flow is found again, from either direction. */
    for (int i = 0; i < N; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "192.168.%d.%d:%d", i / 250, i % 250, 1024 + i);
        struct tb_addr c = tp_addr(buf), s = tp_addr("10.0.0.1:3306");
        struct tb_flow_key k;
        int side;
        uint32_t h = tb_flow_key_make(&k, &s, &c, &side);
        struct tb_flow *f = tb_flow_find(&t, &k, h);
        assert_ptr_equal(f, flows[i]);
        struct tb_addr back;
        tb_flow_addr(f, 1 - side, &back);
        assert_true(tb_addr_eq(&back, &c));
    }
    /* Most recent first: the oldest is the first added until touched. */
    assert_ptr_equal(tb_flow_oldest(&t, TB_FL_ACTIVE), flows[0]);
    tb_flow_touch(&t, flows[0], TB_FL_ACTIVE);
    assert_ptr_equal(tb_flow_oldest(&t, TB_FL_ACTIVE), flows[1]);
    tb_flow_touch(&t, flows[1], TB_FL_CLOSED);
    assert_ptr_equal(tb_flow_oldest(&t, TB_FL_ACTIVE), flows[2]);
    assert_ptr_equal(tb_flow_oldest(&t, TB_FL_CLOSED), flows[1]);
    assert_int_equal(t.lists[TB_FL_CLOSED].count, 1);
    assert_int_equal(t.lists[TB_FL_ACTIVE].count, N - 1);
    /* Removal takes it out of the hash and its list. */
    struct tb_flow_key k = flows[1]->key;
    uint32_t h = flows[1]->hash;
    tb_flow_remove(&t, flows[1]);
    assert_null(tb_flow_find(&t, &k, h));
    assert_null(tb_flow_oldest(&t, TB_FL_CLOSED));
    assert_int_equal(t.count, N - 1);
    tb_flow_remove(&t, flows[N - 1]);
    tb_flow_remove(&t, flows[2]);
    assert_ptr_equal(tb_flow_oldest(&t, TB_FL_ACTIVE), flows[3]);
    assert_int_equal(t.count, N - 3);
    tb_flow_table_fini(&t);
}

static void test_ipv6_addr_roundtrip(void **state)
{
    (void)state;
    struct tb_flow_table t;
    assert_int_equal(tb_flow_table_init(&t), 0);
    struct tb_addr c = tp_addr("[2001:db8::5]:41000"), s = tp_addr("[2001:db8::1]:8080");
    struct tb_flow_key k;
    int side;
    uint32_t h = tb_flow_key_make(&k, &c, &s, &side);
    struct tb_flow *f = tb_flow_add(&t, &k, h, 6);
    struct tb_addr a;
    char buf[TB_ADDR_STRLEN];
    tb_flow_addr(f, 1 - side, &a);
    assert_string_equal(tb_addr_fmt(&a, buf, sizeof buf), "[2001:db8::1]:8080");
    tb_flow_table_fini(&t);
}

/* tb_flow_has() against the key: a packet belongs to the flow exactly when its
 * key is the flow's, and the side it gives is the key's. */
static void test_has_agrees_with_key(void **state)
{
    (void)state;
    static const char *eps[] = {
        "10.0.0.1:80",   "10.0.0.1:81",         "10.0.0.2:80",          "10.0.0.9:50000",
        "10.0.0.1:0",    "0.0.0.0:80",          "[2001:db8::1]:80",     "[2001:db8::1]:8080",
        "[::a00:1]:80",  "[::ffff:a00:1]:80",   "[2001:db8::1:0:0]:80", "255.255.255.255:65535",
    };
    enum { N = sizeof eps / sizeof eps[0] };
    struct tb_addr a[N];
    struct tb_flow f;
    for (int i = 0; i < N; i++)
        a[i] = tp_addr(eps[i]);
    int hits = 0;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            int fside;
            memset(&f, 0, sizeof f);
            tb_flow_key_make(&f.key, &a[i], &a[j], &fside);
            for (int x = 0; x < N; x++) {
                for (int y = 0; y < N; y++) {
                    struct tb_flow_key k;
                    int side, hside = -1;
                    tb_flow_key_make(&k, &a[x], &a[y], &side);
                    bool same = memcmp(&k, &f.key, sizeof k) == 0;
                    assert_int_equal(tb_flow_has(&f, &a[x], &a[y], &hside), same);
                    if (same) {
                        assert_int_equal(hside, side);
                        hits++;
                    }
                }
            }
        }
    }
    /* Each flow (i, j) is had by (i, j) and (j, i), one pair when i == j, and
     * more where two spellings are one endpoint (10.0.0.1 and ::ffff:a00:1). */
    assert_int_equal(hits, 2 * N * N - N + 90);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_both_directions),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_ipv6_addr_roundtrip),
        cmocka_unit_test(test_has_agrees_with_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
