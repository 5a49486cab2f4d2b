/* SPDX-License-Identifier: MIT */
/* test_catalog.c — catalog ids, deduplication, the per-tier class cap and persistence marks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "addr.h"
#include "catalog.h"
#include "tb.h"

static struct tb_addr addr(const char *s)
{
    struct tb_addr a;
    assert_int_equal(tb_addr_parse(s, &a), 0);
    return a;
}

static void test_tiers(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t id = 0;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier_count(cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &id), 0);
    assert_int_equal(id, 1);
    assert_int_equal(tb_catalog_tier(cat, "http-8080", "http", &id), 0);
    assert_int_equal(id, 2);
    /* Same name again: same id, proto kept. */
    assert_int_equal(tb_catalog_tier(cat, "mysql", "generic", &id), 0);
    assert_int_equal(id, 1);
    assert_string_equal(tb_catalog_tier_get(cat, 1)->proto, "mysql");
    assert_string_equal(tb_catalog_tier_get(cat, 2)->name, "http-8080");
    assert_int_equal(tb_catalog_tier_get(cat, 2)->id, 2);
    assert_false(tb_catalog_tier_get(cat, 2)->configured);
    assert_int_equal(tb_catalog_tier_set_configured(cat, 2, true), 0);
    assert_true(tb_catalog_tier_get(cat, 2)->configured);
    assert_int_equal(tb_catalog_tier_set_configured(cat, 3, true), TB_E_INVAL);
    assert_null(tb_catalog_tier_get(cat, 0));
    assert_null(tb_catalog_tier_get(cat, 3));
    assert_int_equal(tb_catalog_tier_count(cat), 2);
    assert_int_equal(tb_catalog_tier_find(cat, "http-8080", &id), 0);
    assert_int_equal(id, 2);
    assert_int_equal(tb_catalog_tier_find(cat, "http", &id), TB_E_NOTFOUND);
    assert_int_equal(tb_catalog_tier_find(cat, "mysqlx", &id), TB_E_NOTFOUND);
    char longname[TB_NAME_MAX + 1];
    memset(longname, 'a', TB_NAME_MAX);
    longname[TB_NAME_MAX] = '\0';
    assert_int_equal(tb_catalog_tier(cat, longname, "http", &id), TB_E_INVAL);
    assert_int_equal(tb_catalog_tier_find(cat, longname, &id), TB_E_NOTFOUND);
    assert_int_equal(tb_catalog_tier(cat, "", "http", &id), TB_E_INVAL);
    assert_int_equal(tb_catalog_tier(cat, "x", "a-protocol-name-too-long", &id), TB_E_INVAL);
    assert_int_equal(tb_catalog_tier_count(cat), 2);
    tb_catalog_free(cat);
}

static void test_servers_hosts(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t t1, t2, id = 0, tier = 0;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &t1), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &t2), 0);
    struct tb_addr db = addr("10.0.0.3:3306"), web = addr("[2001:db8::1]:80");
    assert_int_equal(tb_catalog_server(cat, t1, &db, &id), 0);
    assert_int_equal(id, 1);
    assert_int_equal(tb_catalog_server(cat, t2, &web, &id), 0);
    assert_int_equal(id, 2);
    assert_int_equal(tb_catalog_server(cat, t1, &db, &id), 0);
    assert_int_equal(id, 1);
    /* The same endpoint claimed by a second tier is a second server; lookup by
     * address alone finds the first. */
    assert_int_equal(tb_catalog_server(cat, t2, &db, &id), 0);
    assert_int_equal(id, 3);
    assert_int_equal(tb_catalog_server_find(cat, &db, &id), 0);
    assert_int_equal(id, 1);
    assert_int_equal(tb_catalog_server_find(cat, &web, &id), 0);
    assert_int_equal(id, 2);
    struct tb_addr other_port = addr("10.0.0.3:3307");
    assert_int_equal(tb_catalog_server_find(cat, &other_port, &id), TB_E_NOTFOUND);
    assert_int_equal(tb_catalog_server(cat, 9, &db, &id), TB_E_INVAL);
    assert_int_equal(tb_catalog_server_count(cat), 3);
    const struct tb_server_info *s = tb_catalog_server_get(cat, 2);
    assert_int_equal(s->tier, t2);
    assert_true(tb_addr_eq(&s->addr, &web));
    assert_null(tb_catalog_server_get(cat, 4));

    /* Hosts: ports ignored, deduplicated per tier. */
    struct tb_addr h1 = addr("10.0.0.3:1234"), h1b = addr("10.0.0.3"), h2 = addr("10.0.0.4");
    assert_int_equal(tb_catalog_host(cat, t1, &h1), 0);
    assert_int_equal(tb_catalog_host(cat, t1, &h1b), 0);
    assert_int_equal(tb_catalog_host(cat, t1, &h2), 0);
    assert_int_equal(tb_catalog_host(cat, t2, &h1), 0);
    assert_int_equal(tb_catalog_host(cat, 7, &h1), TB_E_INVAL);
    assert_int_equal(tb_catalog_host_count(cat), 3);
    struct tb_addr out[4];
    assert_int_equal(tb_catalog_tier_hosts(cat, t1, out, 4), 2);
    assert_true(tb_addr_eq(&out[0], &h1b));
    assert_true(tb_addr_eq(&out[1], &h2));
    assert_int_equal(tb_catalog_tier_hosts(cat, t1, out, 1), 2); /* counts beyond max */
    assert_int_equal(tb_catalog_tier_hosts(cat, t2, out, 4), 1);
    assert_int_equal(tb_catalog_host_at(cat, 2, &tier, &out[0]), 0);
    assert_int_equal(tier, t2);
    assert_int_equal(out[0].port, 0);
    assert_true(tb_addr_ip_eq(&out[0], &h1));
    assert_int_equal(tb_catalog_host_at(cat, 3, &tier, &out[0]), TB_E_NOTFOUND);
    tb_catalog_free(cat);
}

static void test_classes(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t t1, t2, id = 0;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &t1), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &t2), 0);
    const char *sel = "select * from t where id = ?xyz"; /* only 28 bytes are the key */
    assert_int_equal(tb_catalog_class(cat, t1, sel, 28, &id), 0);
    assert_int_equal(id, 1);
    assert_int_equal(tb_catalog_class(cat, t1, sel, 27, &id), 0); /* a prefix is another */
    assert_int_equal(id, 2);
    assert_int_equal(tb_catalog_class(cat, t2, sel, 28, &id), 0); /* another tier */
    assert_int_equal(id, 3);
    assert_int_equal(tb_catalog_class(cat, t1, "select * from t where id = ?", 28, &id), 0);
    assert_int_equal(id, 1);
    assert_string_equal(tb_catalog_class_get(cat, 1)->text, "select * from t where id = ?");
    assert_string_equal(tb_catalog_class_get(cat, 2)->text, "select * from t where id = ");
    assert_int_equal(tb_catalog_class_get(cat, 3)->tier, t2);
    assert_int_equal(tb_catalog_class(cat, t1, "", 0, &id), 0);
    assert_int_equal(id, 4);
    assert_int_equal(tb_catalog_class(cat, t1, NULL, 0, &id), 0); /* the same empty text */
    assert_int_equal(id, 4);
    assert_int_equal(tb_catalog_class(cat, t1, NULL, 3, &id), TB_E_INVAL);
    assert_string_equal(tb_catalog_class_get(cat, 4)->text, "");
    /* An id the catalog does not hold (a damaged database's request): "?". */
    assert_string_equal(tb_catalog_class_text(cat, 2), "select * from t where id = ");
    assert_string_equal(tb_catalog_class_text(cat, 4), "");
    assert_string_equal(tb_catalog_class_text(cat, 5), "?");
    assert_string_equal(tb_catalog_class_text(cat, 0), "?");
    assert_string_equal(tb_catalog_class_text(cat, UINT32_MAX), "?");
    /* A NUL inside the text sends it to "other", created on first use. */
    assert_int_equal(tb_catalog_class(cat, t2, "GET /\0x", 7, &id), 0);
    assert_int_equal(id, 5);
    assert_string_equal(tb_catalog_class_get(cat, 5)->text, "other");
    assert_int_equal(tb_catalog_class(cat, t2, "other", 5, &id), 0);
    assert_int_equal(id, 5);
    assert_int_equal(tb_catalog_class(cat, 3, "x", 1, &id), TB_E_INVAL);
    assert_int_equal(tb_catalog_class(cat, 0, "x", 1, &id), TB_E_INVAL);
    assert_null(tb_catalog_class_get(cat, 6));
    assert_int_equal(tb_catalog_class_count(cat), 5);

    /* Texts agreeing on the first TB_CATALOG_CLASS_MAX bytes are one class. */
    char big1[TB_CATALOG_CLASS_MAX + 200], big2[TB_CATALOG_CLASS_MAX + 300];
    memset(big1, 'q', sizeof big1);
    memset(big2, 'q', sizeof big2);
    big2[TB_CATALOG_CLASS_MAX + 5] = 'z';
    assert_int_equal(tb_catalog_class(cat, t1, big1, sizeof big1, &id), 0);
    assert_int_equal(id, 6);
    assert_int_equal(tb_catalog_class(cat, t1, big2, sizeof big2, &id), 0);
    assert_int_equal(id, 6);
    assert_int_equal(strlen(tb_catalog_class_get(cat, 6)->text), TB_CATALOG_CLASS_MAX);
    /* A 2-byte character straddling the cut is left out whole. */
    big1[TB_CATALOG_CLASS_MAX - 1] = (char)0xc3;
    big1[TB_CATALOG_CLASS_MAX] = (char)0xa9;
    assert_int_equal(tb_catalog_class(cat, t1, big1, sizeof big1, &id), 0);
    assert_int_equal(id, 7);
    assert_int_equal(strlen(tb_catalog_class_get(cat, 7)->text), TB_CATALOG_CLASS_MAX - 1);
    tb_catalog_free(cat);
}

static void test_class_cap(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t t1, t2, id = 0;
    char buf[64];
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &t1), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &t2), 0);
    const struct tb_class_info *first = NULL;
    for (uint32_t i = 0; i < TB_CATALOG_MAX_CLASSES_PER_TIER; i++) {
        int n = snprintf(buf, sizeof buf, "GET /page/%u", i);
        assert_int_equal(tb_catalog_class(cat, t1, buf, (size_t)n, &id), 0);
        assert_int_equal(id, i + 1);
        if (i == 0)
            first = tb_catalog_class_get(cat, 1);
    }
    /* Entries never move although the tables grew many times. */
    assert_ptr_equal(tb_catalog_class_get(cat, 1), first);
    assert_string_equal(first->text, "GET /page/0");
    /* The cap is reached: new texts of tier 1 go to its "other" class. */
    assert_int_equal(tb_catalog_class(cat, t1, "GET /new", 8, &id), 0);
    assert_int_equal(id, 10001);
    assert_string_equal(tb_catalog_class_get(cat, 10001)->text, "other");
    assert_int_equal(tb_catalog_class(cat, t1, "GET /newer", 10, &id), 0);
    assert_int_equal(id, 10001);
    /* Known texts keep their ids; other tiers are unaffected. */
    assert_int_equal(tb_catalog_class(cat, t1, "GET /page/9999", 14, &id), 0);
    assert_int_equal(id, 10000);
    assert_int_equal(tb_catalog_class(cat, t2, "GET /new", 8, &id), 0);
    assert_int_equal(id, 10002);
    assert_int_equal(tb_catalog_class_count(cat), 10002);
    for (uint32_t i = 0; i < TB_CATALOG_MAX_CLASSES_PER_TIER; i += 997) {
        int n = snprintf(buf, sizeof buf, "GET /page/%u", i);
        assert_int_equal(tb_catalog_class(cat, t1, buf, (size_t)n, &id), 0);
        assert_int_equal(id, i + 1);
        assert_string_equal(tb_catalog_class_get(cat, id)->text, buf);
    }
    tb_catalog_free(cat);
}

static void test_many(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t id = 0;
    char buf[64];
    assert_int_equal(tb_catalog_new(&cat), 0);
    /* 40 tiers × 2 500 classes and 20 000 servers: every map grows repeatedly. */
    for (uint32_t t = 1; t <= 40; t++) {
        snprintf(buf, sizeof buf, "tier%u", t);
        assert_int_equal(tb_catalog_tier(cat, buf, "generic", &id), 0);
        assert_int_equal(id, t);
    }
    for (uint32_t i = 0; i < 100000; i++) {
        uint32_t tier = i % 40 + 1;
        int n = snprintf(buf, sizeof buf, "q%u", i / 40);
        assert_int_equal(tb_catalog_class(cat, tier, buf, (size_t)n, &id), 0);
        assert_int_equal(id, i + 1);
    }
    for (uint32_t i = 0; i < 20000; i++) {
        uint8_t ip[4] = {10, (uint8_t)(i >> 8), (uint8_t)i, 1};
        struct tb_addr a;
        tb_addr_from_v4(&a, ip, 5432);
        assert_int_equal(tb_catalog_server(cat, i % 40 + 1, &a, &id), 0);
        assert_int_equal(id, i + 1);
    }
    for (uint32_t i = 0; i < 100000; i += 7) {
        int n = snprintf(buf, sizeof buf, "q%u", i / 40);
        assert_int_equal(tb_catalog_class(cat, i % 40 + 1, buf, (size_t)n, &id), 0);
        assert_int_equal(id, i + 1);
    }
    for (uint32_t i = 0; i < 20000; i += 3) {
        uint8_t ip[4] = {10, (uint8_t)(i >> 8), (uint8_t)i, 1};
        struct tb_addr a;
        tb_addr_from_v4(&a, ip, 5432);
        assert_int_equal(tb_catalog_server_find(cat, &a, &id), 0);
        assert_int_equal(id, i + 1);
    }
    assert_int_equal(tb_catalog_class_count(cat), 100000);
    assert_int_equal(tb_catalog_server_count(cat), 20000);
    tb_catalog_free(cat);
}

static void test_marks(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    struct tb_catalog_marks m;
    uint32_t t, id;
    struct tb_addr a = addr("10.1.1.1:80");
    assert_int_equal(tb_catalog_new(&cat), 0);
    const struct tb_catalog_marks *p = tb_catalog_persisted(cat);
    assert_int_equal(p->tiers + p->servers + p->classes + p->hosts, 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &t), 0);
    assert_int_equal(tb_catalog_server(cat, t, &a, &id), 0);
    assert_int_equal(tb_catalog_class(cat, t, "GET /", 5, &id), 0);
    assert_int_equal(tb_catalog_class(cat, t, "GET /x", 6, &id), 0);
    assert_int_equal(tb_catalog_host(cat, t, &a), 0);
    tb_catalog_marks_get(cat, &m);
    assert_int_equal(m.tiers, 1);
    assert_int_equal(m.servers, 1);
    assert_int_equal(m.classes, 2);
    assert_int_equal(m.hosts, 1);
    assert_int_equal(p->classes, 0);
    tb_catalog_mark_persisted(cat);
    assert_int_equal(p->tiers, 1);
    assert_int_equal(p->servers, 1);
    assert_int_equal(p->classes, 2);
    assert_int_equal(p->hosts, 1);
    /* Lookups of known entries do not move anything. */
    assert_int_equal(tb_catalog_class(cat, t, "GET /", 5, &id), 0);
    assert_int_equal(tb_catalog_class(cat, t, "GET /y", 6, &id), 0);
    assert_int_equal(id, 3);
    tb_catalog_marks_get(cat, &m);
    assert_int_equal(m.classes, 3);
    assert_int_equal(p->classes, 2);
    assert_int_equal(m.tiers, 1);
    tb_catalog_free(cat);
}

/* Random find-or-add operations against a plain linear-search model: ids,
 * dedup and texts must agree after every step. Short texts over a small
 * alphabet make repeats (hits) as common as new entries (misses). */
struct model_class {
    uint32_t tier;
    char text[8];
    size_t len;
};

static void test_random_vs_model(void **state)
{
    (void)state;
    static struct model_class model[20000];
    size_t nmodel = 0;
    struct tb_catalog *cat;
    uint32_t tiers[3], id;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "a", "http", &tiers[0]), 0);
    assert_int_equal(tb_catalog_tier(cat, "b", "http", &tiers[1]), 0);
    assert_int_equal(tb_catalog_tier(cat, "c", "http", &tiers[2]), 0);
    for (int op = 0; op < 40000; op++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        char text[8];
        size_t len = (size_t)(x % 5);
        for (size_t i = 0; i < len; i++)
            text[i] = (char)('a' + (x >> (8 + 3 * i)) % 6);
        uint32_t tier = tiers[(x >> 40) % 3];
        uint32_t want = 0;
        for (size_t i = 0; i < nmodel && !want; i++)
            if (model[i].tier == tier && model[i].len == len &&
                memcmp(model[i].text, text, len) == 0)
                want = (uint32_t)i + 1;
        if (!want) {
            assert_true(nmodel < TB_ARRAY_SIZE(model));
            model[nmodel].tier = tier;
            memcpy(model[nmodel].text, text, len);
            model[nmodel].len = len;
            want = (uint32_t)++nmodel;
        }
        assert_int_equal(tb_catalog_class(cat, tier, text, len, &id), 0);
        assert_int_equal(id, want);
    }
    /* Of 3 tiers × (1 + 6 + 36 + 216 + 1296) possible texts, this sequence
     * draws 3882 distinct ones (counted by an independent Python model). */
    assert_int_equal(tb_catalog_class_count(cat), nmodel);
    assert_int_equal(nmodel, 3882);
    for (size_t i = 0; i < nmodel; i++) {
        const struct tb_class_info *c = tb_catalog_class_get(cat, (uint32_t)i + 1);
        assert_int_equal(c->tier, model[i].tier);
        assert_int_equal(strlen(c->text), model[i].len);
        assert_memory_equal(c->text, model[i].text, model[i].len);
    }
    tb_catalog_free(cat);
}

/* Texts one byte apart, at every length around the memo's word compares and
 * its size limit, at every position: each is its own class, and asking again
 * (the memo answering) gives the same id. Texts that differ only inside share
 * a memo slot, so the memo's compare is what tells them apart. */
static void test_memo_near_misses(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t tier, id, id2, base;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "t", "http", &tier), 0);
    char text[140];
    uint32_t added = 0;
    for (size_t len = 0; len <= 130; len++) {
        for (size_t i = 0; i < len; i++)
            text[i] = (char)('a' + (i * 7 + len) % 26);
        assert_int_equal(tb_catalog_class(cat, tier, text, len, &base), 0);
        assert_int_equal(base, ++added);
        for (size_t pos = 0; pos < len; pos++) {
            char saved = text[pos];
            text[pos] = (char)(saved ^ 0x01);
            assert_int_equal(tb_catalog_class(cat, tier, text, len, &id), 0);
            assert_int_equal(id, ++added);
            assert_int_equal(tb_catalog_class(cat, tier, text, len, &id2), 0);
            assert_int_equal(id2, id);
            text[pos] = saved;
            assert_int_equal(tb_catalog_class(cat, tier, text, len, &id), 0);
            assert_int_equal(id, base);
        }
    }
    assert_int_equal(tb_catalog_class_count(cat), added);
    tb_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiers),     cmocka_unit_test(test_servers_hosts),
        cmocka_unit_test(test_classes),   cmocka_unit_test(test_class_cap),
        cmocka_unit_test(test_many),      cmocka_unit_test(test_marks),
        cmocka_unit_test(test_random_vs_model), cmocka_unit_test(test_memo_near_misses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
