/* SPDX-License-Identifier: MIT */
/* test_tiers.c — the --tiers file: syntax, every error message, matching of
 * endpoints, catalog registration and auto-discovery names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto.h"
#include "test_pkt.h"
#include "tiers.h"

static const char good[] =
    "# the demo stack\n"
    "web   http   10.0.0.1:80,[2001:db8::1]:80   hosts=10.0.0.1,10.0.0.11\n"
    "\n"
    "app   auto   *:8080     # any address\n"
    "db    mysql  10.0.0.3:3306  hosts=10.0.0.3\n"
    "misc  generic 10.0.0.4:7000\n";

static void test_parse_good(void **state)
{
    (void)state;
    struct tb_tiers *t;
    char err[256] = "";
    assert_int_equal(tb_tiers_parse(good, sizeof good - 1, "tiers.conf", &t, err, sizeof err), 0);
    assert_int_equal(t->n, 4);
    assert_string_equal(t->tiers[0].name, "web");
    assert_ptr_equal(t->tiers[0].proto, &tb_proto_http1);
    assert_int_equal(t->tiers[0].nservers, 2);
    assert_int_equal(t->tiers[0].nhosts, 2);
    assert_int_equal(t->tiers[0].servers[1].family, 6);
    assert_null(t->tiers[1].proto);
    assert_int_equal(t->tiers[1].servers[0].family, 0);
    assert_int_equal(t->tiers[1].servers[0].port, 8080);
    assert_ptr_equal(t->tiers[2].proto, &tb_proto_mysql);
    assert_ptr_equal(t->tiers[3].proto, &tb_proto_generic);

    struct tb_addr a = tp_addr("10.0.0.1:80");
    assert_ptr_equal(tb_tiers_match(t, &a), &t->tiers[0]);
    a = tp_addr("10.0.0.1:81");
    assert_null(tb_tiers_match(t, &a));
    a = tp_addr("192.168.7.7:8080");
    assert_ptr_equal(tb_tiers_match(t, &a), &t->tiers[1]);
    a = tp_addr("[2001:db8::1]:80");
    assert_ptr_equal(tb_tiers_match(t, &a), &t->tiers[0]);
    a = tp_addr("10.0.0.3:3306");
    assert_ptr_equal(tb_tiers_match(t, &a), &t->tiers[2]);
    assert_null(tb_tiers_match(NULL, &a));
    tb_tiers_free(t);
}

static void expect_error(const char *text, const char *msg)
{
    struct tb_tiers *t = (struct tb_tiers *)1;
    char err[256] = "";
    assert_int_equal(tb_tiers_parse(text, strlen(text), "tiers.conf", &t, err, sizeof err),
                     TB_E_BADFMT);
    assert_null(t);
    assert_string_equal(err, msg);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_error("a http 1.2.3.4:80\n\nb foo 1.2.3.4:81\n",
                 "tiers.conf:3: unknown protocol 'foo'");
    expect_error("a http\n",
                 "tiers.conf:1: expected 'NAME PROTO SERVER[,SERVER...] [hosts=HOST,...]'");
    expect_error("a http 1.2.3.4\n",
                 "tiers.conf:1: bad server '1.2.3.4' (want a.b.c.d:port, [v6]:port or *:port)");
    expect_error("a http 1.2.3.4:80,300.1.1.1:80\n",
                 "tiers.conf:1: bad server '300.1.1.1:80' (want a.b.c.d:port, [v6]:port or "
                 "*:port)");
    expect_error("a http 1.2.3.4:80 hosts=1.2.3.4:22\n",
                 "tiers.conf:1: bad host '1.2.3.4:22' (want an address, no port)");
    expect_error("a http 1.2.3.4:80 owner=me\n",
                 "tiers.conf:1: unexpected field 'owner=me' (want hosts=...)");
    expect_error("a http 1.2.3.4:80 hosts=1.1.1.1 extra\n",
                 "tiers.conf:1: unexpected field 'extra'");
    expect_error("a http 1.2.3.4:80\na mysql 1.2.3.5:3306\n",
                 "tiers.conf:2: tier 'a' defined twice");
    expect_error("a http 1.2.3.4:80\nb http 1.2.3.4:80\n",
                 "tiers.conf:2: server 1.2.3.4:80 listed twice");
    expect_error("# nothing\n\n", "tiers.conf: no tiers defined");
    expect_error("a http *:80,*:80\n", "tiers.conf:1: server *:80 listed twice");
    expect_error("a,b http 1.2.3.4:80\n", "tiers.conf:1: invalid tier name 'a,b'");
}

static void test_binary_error(void **state)
{
    (void)state;
    static const char bin[] = "a http 1.2.3.4:80\n\0junk";
    struct tb_tiers *t;
    char err[256] = "";
    assert_int_equal(tb_tiers_parse(bin, sizeof bin - 1, "x", &t, err, sizeof err), TB_E_BADFMT);
    assert_string_equal(err, "x:1: binary data in a tiers file");
}

static void test_bom_and_crlf(void **state)
{
    (void)state;
    static const char text[] = "\xef\xbb\xbf# saved on Windows\r\nweb http 10.0.0.1:80\r\n";
    struct tb_tiers *t;
    char err[256] = "";
    assert_int_equal(tb_tiers_parse(text, sizeof text - 1, "w", &t, err, sizeof err), 0);
    assert_int_equal(t->n, 1);
    assert_string_equal(t->tiers[0].name, "web");
    assert_int_equal(t->tiers[0].servers[0].port, 80);
    tb_tiers_free(t);
}

static void test_load_missing(void **state)
{
    (void)state;
    struct tb_tiers *t;
    char err[256] = "";
    assert_int_equal(tb_tiers_load("/nonexistent/tiers.conf", &t, err, sizeof err), TB_E_IO);
    assert_string_equal(err, "/nonexistent/tiers.conf: No such file or directory");
}

static void test_register(void **state)
{
    (void)state;
    struct tb_tiers *t;
    struct tb_catalog *cat;
    char err[256] = "";
    assert_int_equal(tb_tiers_parse(good, sizeof good - 1, "tiers.conf", &t, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_tiers_register(t, cat), 0);
    assert_int_equal(tb_catalog_tier_count(cat), 4);
    const struct tb_tier_info *ti = tb_catalog_tier_get(cat, t->tiers[0].tier_id);
    assert_string_equal(ti->name, "web");
    assert_string_equal(ti->proto, "http");
    assert_true(ti->configured);
    assert_string_equal(tb_catalog_tier_get(cat, t->tiers[1].tier_id)->proto, "auto");
    /* Explicit servers only: "*:8080" waits for a real address. */
    assert_int_equal(tb_catalog_server_count(cat), 4);
    struct tb_addr a = tp_addr("[2001:db8::1]:80");
    uint32_t sid;
    assert_int_equal(tb_catalog_server_find(cat, &a, &sid), 0);
    assert_int_equal(tb_catalog_server_get(cat, sid)->tier, t->tiers[0].tier_id);
    /* web: 10.0.0.1 (host and server), 10.0.0.11, 2001:db8::1. */
    struct tb_addr hosts[8];
    assert_int_equal(tb_catalog_tier_hosts(cat, t->tiers[0].tier_id, hosts, 8), 3);
    assert_int_equal(tb_catalog_tier_hosts(cat, t->tiers[1].tier_id, hosts, 8), 0);
    assert_int_equal(tb_catalog_tier_hosts(cat, t->tiers[2].tier_id, hosts, 8), 1);
    tb_catalog_free(cat);
    tb_tiers_free(t);
}

static void test_auto_name(void **state)
{
    (void)state;
    char name[TB_NAME_MAX];
    tb_tiers_auto_name(&tb_proto_http1, 80, name, sizeof name);
    assert_string_equal(name, "http");
    tb_tiers_auto_name(&tb_proto_http1, 8080, name, sizeof name);
    assert_string_equal(name, "http-8080");
    tb_tiers_auto_name(&tb_proto_mysql, 3306, name, sizeof name);
    assert_string_equal(name, "mysql");
    tb_tiers_auto_name(&tb_proto_mysql, 3307, name, sizeof name);
    assert_string_equal(name, "mysql-3307");
    tb_tiers_auto_name(&tb_proto_generic, 7000, name, sizeof name);
    assert_string_equal(name, "generic-7000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_binary_error),
        cmocka_unit_test(test_bom_and_crlf),
        cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_register),
        cmocka_unit_test(test_auto_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
