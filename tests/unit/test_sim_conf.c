/* SPDX-License-Identifier: MIT */
/* test_sim_conf.c — the simulator's configuration: values, defaults, derived
 * names, overrides and one-line file:line errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../sim/sim.h"

static const char good[] = "# a small stack\n"
                           "[sim]\n"
                           "seed = 7\n"
                           "duration = 5s\n"
                           "users = 50\n"
                           "think_time = exp(500ms)\n"
                           "servers = 1/2/1\n"
                           "\n"
                           "[tier web]\n"
                           "proto = http\n"
                           "port = 80\n"
                           "cores = 4\n"
                           "[tier app]\n"
                           "proto = http\n"
                           "port = 8080   ; comment after a value\n"
                           "threads = 20\n"
                           "pool = 4\n"
                           "speeds = 0.53, 0.76, 1.0\n"
                           "governor = 500ms\n"
                           "[tier db]\n"
                           "proto = mysql\n"
                           "port = 3306\n"
                           "cores = 2\n"
                           "[class ViewStory]\n"
                           "weight = 3\n"
                           "path = /story#top/{id}\n"
                           "demand.app = exp(2ms)\n"
                           "demand.db = const(1ms)\n"
                           "queries = 3\n"
                           "sql = SELECT id, title FROM stories WHERE id = {id}\n"
                           "[freeze]\n"
                           "server = app/2\n"
                           "at = 1s:100ms, 3s:250ms\n"
                           "[freeze]\n"
                           "server = app\n"
                           "every = uniform(1s, 3s)\n"
                           "length = uniform(100ms, 300ms)\n";

static void test_good(void **state)
{
    (void)state;
    static struct sim_conf c;
    char err[256] = "";
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, good, "good.conf", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    assert_int_equal(c.seed, 7);
    assert_int_equal(c.duration_ns, 5 * TB_NS_PER_SEC);
    assert_int_equal(c.users, 50);
    assert_int_equal(c.ntiers, 3);
    assert_int_equal(c.tiers[0].servers, 1);
    assert_int_equal(c.tiers[1].servers, 2);
    assert_int_equal(c.tiers[2].servers, 1);
    assert_int_equal(c.tiers[1].port, 8080);
    assert_int_equal(c.tiers[1].nspeeds, 3);
    assert_true(c.tiers[1].speeds[0] == 0.53 && c.tiers[1].speeds[2] == 1.0);
    assert_int_equal(c.tiers[1].governor_ns, 500 * TB_NS_PER_MS);
    /* Names as tbneck discovers them. */
    assert_string_equal(c.tiers[0].wire_name, "http");
    assert_string_equal(c.tiers[1].wire_name, "http-8080");
    assert_string_equal(c.tiers[2].wire_name, "mysql");
    assert_string_equal(c.tiers[1].host, "app.tbneck.test");
    const struct sim_class_conf *cl = &c.classes[0];
    assert_true(cl->weight == 3.0);
    /* '#' inside a value is not a comment. */
    assert_string_equal(cl->tmpl[0], "/story#top/{id}");
    assert_true(cl->demand[1].kind == SIM_DIST_EXP && cl->demand[1].a == 2e6);
    assert_true(cl->demand[0].kind == SIM_DIST_CONST && cl->demand[0].a == 50000);
    assert_true(cl->calls[0].a == 1 && cl->calls[1].a == 3 && cl->calls[2].a == 0);
    assert_int_equal(c.nfreezes, 2);
    assert_int_equal(c.freezes[0].tier, 1);
    assert_int_equal(c.freezes[0].server, 1);
    assert_int_equal(c.freezes[0].nat, 2);
    assert_int_equal(c.freezes[0].at_ns[1], 3 * TB_NS_PER_SEC);
    assert_int_equal(c.freezes[0].len_ns[1], 250 * TB_NS_PER_MS);
    assert_int_equal(c.freezes[1].server, -1);
    assert_true(c.freezes[1].random);

    /* Overrides of the server counts. */
    assert_int_equal(sim_conf_set_servers(&c, "2/3/2", err, sizeof err), 0);
    assert_int_equal(c.tiers[1].servers, 3);
    assert_int_equal(sim_conf_set_servers(&c, "2/3", err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "servers '2/3' names 2 tiers, the configuration has 3");

    /* The written configuration parses back to the same values. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(sim_conf_write(&c, f), 0);
    fclose(f);
    static struct sim_conf back;
    sim_conf_defaults(&back);
    assert_int_equal(sim_conf_parse(&back, text, "written", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&back, err, sizeof err), 0);
    assert_int_equal(back.seed, 7);
    assert_int_equal(back.start_ns, c.start_ns);
    assert_int_equal(back.tiers[1].servers, 3);
    assert_string_equal(back.tiers[1].wire_name, "http-8080");
    assert_true(back.classes[0].calls[1].a == 3);
    assert_int_equal(back.freezes[0].at_ns[0], TB_NS_PER_SEC);
    for (int t = 0; t < 3; t++)
        assert_string_equal(back.classes[0].tmpl[t], c.classes[0].tmpl[t]);
    for (int t = 0; t < 3; t++)
        assert_string_equal(back.classes[0].expect[t], c.classes[0].expect[t]);
    free(text);
}

/* Each bad input yields exactly this one-line message. */
static void expect_error(const char *text, const char *want)
{
    static struct sim_conf c;
    char err[256] = "";
    sim_conf_defaults(&c);
    int rc = sim_conf_parse(&c, text, "bad.conf", err, sizeof err);
    assert_true(rc < 0);
    assert_string_equal(err, want);
    assert_null(strchr(err, '\n'));
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("[sim]\nusers = many\n",
                 "bad.conf:2: users: 'many' is not an integer in [1, 1000000]");
    expect_error("users = 3\n", "bad.conf:1: 'users' outside any section");
    expect_error("[sim]\n\n[bogus]\n",
                 "bad.conf:3: unknown section [bogus] (sim, tier NAME, class NAME, freeze, expect)");
    expect_error("[tier a]\nproto = ftp\n", "bad.conf:2: proto: 'ftp' is not http, mysql, postgres or redis");
    expect_error("[tier a]\ncolor = red\n", "bad.conf:2: unknown key 'color' in [tier a]");
    expect_error("[tier a]\n[class c]\ndemand.b = 1ms\n",
                 "bad.conf:3: demand.b: unknown tier 'b' (tiers must be declared before classes)");
    expect_error("[tier a]\n[class c]\ndemand.a = gauss(1ms)\n",
                 "bad.conf:3: demand.a: 'gauss(1ms)': unknown distribution (const, exp, uniform, "
                 "lognormal)");
    expect_error("[sim]\nduration = soon\n",
                 "bad.conf:2: duration: 'soon' is not a duration (e.g. 50ms, 2s)");
    expect_error("[sim]\nseed\n", "bad.conf:2: expected 'key = value'");
    expect_error("[tier a]\n[tier a]\n", "bad.conf:2: tier 'a' declared twice");
    expect_error("[tier a]\nspeeds = 1.0, 0.5\n", "bad.conf:2: speeds: levels must be ascending");
    expect_error("[tier a]\n[freeze]\nserver = a\nat = 2s:100ms, 1s:100ms\n",
                 "bad.conf:4: at: freezes must be in order and must not overlap");
    expect_error("[tier a]\n[freeze]\nserver = a\n",
                 "bad.conf: [freeze] for a needs either 'at' or both 'every' and 'length'");
    expect_error("[sim]\nservers = 1/2\n[tier a]\n",
                 "bad.conf:2: servers '1/2' names 2 tiers, the configuration has 1");
    expect_error("[tier a]\n[class c]\npath = nope\n",
                 "bad.conf:3: path: 'nope' must start with '/'");
}

static void test_finish_errors(void **state)
{
    (void)state;
    static struct sim_conf c;
    char err[256];
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, "[tier db]\nproto = mysql\n[tier web]\n[class x]\n", "x",
                                    err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "tier 'db': the front tier must speak http");
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, "[tier a]\n[tier b]\n[class x]\n", "x", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "tiers 'a' and 'b' share port 80");
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, "[tier a]\nspeeds = 0.5, 1\ngovernor = 100ms\n"
                                        "speed_every = 1s\n[class x]\n",
                                    "x", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "tier 'a': speed_every needs two speeds or more and no governor");
}

/* Expected classes: stated literally by class.TIER, or by each protocol's
 * template rule; the expected strings here are written out by hand from
 * docs/sim.md, not computed. */
static void test_expected_class(void **state)
{
    (void)state;
    static struct sim_conf c;
    char err[256] = "";
    sim_conf_defaults(&c);
    static const char text[] =
        "[tier web]\n[tier app]\nport = 8080\n[tier db]\nproto = mysql\nport = 3306\n"
        "[class A]\nmethod = POST\npath.web = /a/{id}/b.php?x={word}&y={ids}\n"
        "path.app = /img/{n}.png#frag{word}\n"
        "sql = SELECT a FROM t WHERE b IN ({ids}) AND c = '{word}' AND d = {id} LIMIT 5\n"
        "[class B]\npath = /s/{word}\nclass.web = GET /s/stated\nclass.app = GET /s/also\n"
        "class.db = select 1\n";
    assert_int_equal(sim_conf_parse(&c, text, "x", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    assert_string_equal(c.classes[0].expect[0], "POST /a/{id}/b.php");
    assert_string_equal(c.classes[0].expect[1], "POST /img/{id}.png");
    /* The SQL rule replaces placeholders only; the rest stays as written. */
    assert_string_equal(c.classes[0].expect[2],
                        "SELECT a FROM t WHERE b IN (?+) AND c = ? AND d = ? LIMIT 5");
    assert_string_equal(c.classes[1].expect[0], "GET /s/stated");
    assert_string_equal(c.classes[1].expect[1], "GET /s/also");
    assert_string_equal(c.classes[1].expect[2], "select 1");

    /* {word} in a path gives no fixed class: the configuration must state it. */
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, "[tier web]\n[class B]\npath = /s/{word}\n", "x", err,
                                    sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "class 'B' at tier 'web': path '/s/{word}' has {word} before its "
                             "query, which gives no fixed class; state it with class.web");
}

/* [expect]: the diagnosis a configuration states, written as verdict.csv. */
static void test_expect(void **state)
{
    (void)state;
    static struct sim_conf c;
    char err[256] = "", *text = NULL;
    size_t len = 0;
    static const char base[] = "[tier web]\n[tier app]\nport = 8080\nservers = 2\n"
                               "[tier db]\nproto = mysql\nport = 3306\n[class A]\n";
    char conf[512];
    snprintf(conf, sizeof conf, "%s[expect]\nserver = app/2\ncause = freeze\n", base);
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, conf, "x", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(sim_write_verdict(&c, f), 0);
    fclose(f);
    assert_string_equal(text, "http-8080,10.0.3.2:8080,freeze\n");
    free(text);

    snprintf(conf, sizeof conf, "%s[expect]\nserver = db\ncause = cpu\n", base);
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, conf, "x", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    f = open_memstream(&text, &len);
    assert_int_equal(sim_write_verdict(&c, f), 0);
    fclose(f);
    assert_string_equal(text, "mysql,*,cpu\n");
    free(text);

    expect_error("[tier web]\n[expect]\ncause = slow\n",
                 "bad.conf:3: cause: 'slow' is not cpu, freeze, speed, pool, threads or none");
    expect_error("[tier web]\n[expect]\nserver = web\ncause = none\n",
                 "bad.conf: [expect] needs 'cause', and 'server' unless the cause is none");
    expect_error("[tier web]\n[expect]\nserver = web\n",
                 "bad.conf: [expect] needs 'cause', and 'server' unless the cause is none");
    expect_error("[tier web]\n[expect]\nserver = nope\ncause = cpu\n",
                 "bad.conf:3: server: unknown tier 'nope' (tiers must be declared first)");
}

/* --set: one override per call, named in its error. */
static void test_set(void **state)
{
    (void)state;
    static struct sim_conf c;
    char err[256] = "";
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, good, "good.conf", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "tier.db.cores=3", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "tier.app.pool = 8", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "tier.db.speedup=2.5", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "class.ViewStory.demand.db=exp(3ms)", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "class.ViewStory.class.db=select 1", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "sim.servers=2/3/1", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "sim.streams=per-user", err, sizeof err), 0);
    assert_int_equal(sim_conf_set(&c, "freeze.1.at=2s:50ms", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    assert_int_equal(c.tiers[2].cores, 3);
    assert_int_equal(c.tiers[1].pool, 8);
    assert_true(c.tiers[2].speedup == 2.5 && c.tiers[1].speedup == 1.0);
    assert_true(c.classes[0].demand[2].kind == SIM_DIST_EXP && c.classes[0].demand[2].a == 3e6);
    assert_string_equal(c.classes[0].expect[2], "select 1");
    assert_int_equal(c.tiers[0].servers, 2);
    assert_int_equal(c.tiers[1].servers, 3);
    assert_true(c.per_user);
    assert_int_equal(c.freezes[0].nat, 1);
    assert_int_equal(c.freezes[0].at_ns[0], 2 * TB_NS_PER_SEC);

    static const struct {
        const char *set, *want;
    } bad[] = {
        {"tier.db.cores=0", "--set tier.db.cores=0: cores: '0' is not an integer in [1, 1024]"},
        {"tier.db", "--set tier.db: expected SECTION.KEY=VALUE (e.g. tier.db.cores=4)"},
        {"tier.db.cores=", "--set tier.db.cores=: missing value"},
        {"tier.x.cores=2", "--set tier.x.cores=2: the configuration has no tier 'x'"},
        {"class.x.weight=2", "--set class.x.weight=2: the configuration has no class 'x'"},
        {"freeze.3.at=1s:1ms", "--set freeze.3.at=1s:1ms: the configuration has no freeze '3'"},
        {"expect.cause=cpu", "--set expect.cause=cpu: the configuration has no [expect] section"},
        {"web.cores=2", "--set web.cores=2: unknown section 'web' (sim, tier, class, freeze, "
                        "expect)"},
        {"tier.db.nope=1", "--set tier.db.nope=1: unknown key 'nope' in [tier db]"},
        {"sim.servers=1/1", "--set sim.servers=1/1: servers '1/1' names 2 tiers, the "
                            "configuration has 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_true(sim_conf_set(&c, bad[i].set, err, sizeof err) < 0);
        assert_string_equal(err, bad[i].want);
    }
}

static void test_load_missing(void **state)
{
    (void)state;
    static struct sim_conf c;
    char err[256];
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_load(&c, "/nonexistent/x.conf", err, sizeof err), TB_E_IO);
    assert_string_equal(err, "/nonexistent/x.conf: No such file or directory");
    /* The shipped examples all parse and check. */
    static const char *const ex[] = {"quick", "gc", "speedstep", "mix", "cpu-db"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(ex); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/sim/examples/%s.conf", TB_SRCDIR, ex[i]);
        sim_conf_defaults(&c);
        int rc = sim_conf_load(&c, path, err, sizeof err);
        if (rc == 0)
            rc = sim_conf_finish(&c, err, sizeof err);
        if (rc)
            fail_msg("%s", err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_finish_errors),
        cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_expected_class),
        cmocka_unit_test(test_expect),
        cmocka_unit_test(test_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
