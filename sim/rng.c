/* SPDX-License-Identifier: MIT */
/* rng.c — xoshiro256** pseudo-random numbers and the distributions the
 * configuration names (constant, exponential, uniform, lognormal). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
    /* splitmix64 never yields four zero words, the one state xoshiro must avoid. */
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sim_rng_unit(struct sim_rng *r)
{
    /* 53 random bits, shifted by half a step so neither 0 nor 1 comes out. */
    return ((double)(sim_rng_next(r) >> 11) + 0.5) * 0x1.0p-53;
}

uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased for every n. */
    uint64_t x = sim_rng_next(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            x = sim_rng_next(r);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static double normal(struct sim_rng *r)
{
    /* Box-Muller, using one of the pair: simple and reproducible. */
    double u1 = sim_rng_unit(r), u2 = sim_rng_unit(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double sim_dist_sample(const struct sim_dist *d, struct sim_rng *r)
{
    switch (d->kind) {
    case SIM_DIST_CONST:
        return d->a;
    case SIM_DIST_EXP:
        return -d->a * log(sim_rng_unit(r));
    case SIM_DIST_UNIFORM:
        return d->a + (d->b - d->a) * sim_rng_unit(r);
    case SIM_DIST_LOGNORMAL: {
        /* a is the mean, b the sigma of the underlying normal. */
        double mu = log(d->a) - d->b * d->b / 2.0;
        return exp(mu + d->b * normal(r));
    }
    }
    return d->a;
}

double sim_dist_mean(const struct sim_dist *d)
{
    return d->kind == SIM_DIST_UNIFORM ? (d->a + d->b) / 2.0 : d->a;
}

/* One parameter: a duration (bare number = ms) or a plain number. */
static int parse_param(const char *s, size_t len, bool duration, bool force_plain, double *out)
{
    char buf[48];
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0 || len >= sizeof buf)
        return TB_E_INVAL;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (duration && !force_plain) {
        int64_t ns;
        if (tb_parse_duration(buf, TB_NS_PER_MS, &ns) < 0)
            return TB_E_INVAL;
        *out = (double)ns;
        return 0;
    }
    char *end;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v) || v < 0)
        return TB_E_INVAL;
    *out = v;
    return 0;
}

int sim_dist_parse(const char *s, bool duration, struct sim_dist *d, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        enum sim_dist_kind kind;
        int nparams;
    } kinds[] = {
        {"const", SIM_DIST_CONST, 1},
        {"exp", SIM_DIST_EXP, 1},
        {"uniform", SIM_DIST_UNIFORM, 2},
        {"lognormal", SIM_DIST_LOGNORMAL, 2},
    };
    memset(d, 0, sizeof *d);
    while (isspace((unsigned char)*s))
        s++;
    size_t slen = strlen(s);
    while (slen && isspace((unsigned char)s[slen - 1]))
        slen--;
    if (slen == 0 || slen >= sizeof d->text) {
        snprintf(err, errlen, "empty or overlong value");
        return TB_E_INVAL;
    }
    memcpy(d->text, s, slen);
    d->text[slen] = 0;
    const char *open = strchr(d->text, '(');
    if (!open) {
        d->kind = SIM_DIST_CONST;
        if (parse_param(d->text, slen, duration, false, &d->a) < 0) {
            snprintf(err, errlen, "'%s' is not a %s", d->text,
                     duration ? "duration" : "non-negative number");
            return TB_E_INVAL;
        }
        return 0;
    }
    size_t nlen = (size_t)(open - d->text);
    const char *close = strrchr(d->text, ')');
    if (!close || close[1] != 0 || close < open) {
        snprintf(err, errlen, "'%s': missing ')'", d->text);
        return TB_E_INVAL;
    }
    for (size_t k = 0; k < TB_ARRAY_SIZE(kinds); k++) {
        if (strlen(kinds[k].name) != nlen || strncmp(kinds[k].name, d->text, nlen))
            continue;
        d->kind = kinds[k].kind;
        const char *p = open + 1;
        const char *comma = memchr(p, ',', (size_t)(close - p));
        int n = comma ? 2 : 1;
        if (n != kinds[k].nparams) {
            snprintf(err, errlen, "'%s': %s takes %d parameter%s", d->text, kinds[k].name,
                     kinds[k].nparams, kinds[k].nparams > 1 ? "s" : "");
            return TB_E_INVAL;
        }
        const char *e1 = comma ? comma : close;
        /* The lognormal's sigma is a plain number even for durations. */
        if (parse_param(p, (size_t)(e1 - p), duration, false, &d->a) < 0 ||
            (comma && parse_param(comma + 1, (size_t)(close - comma - 1), duration,
                                  d->kind == SIM_DIST_LOGNORMAL, &d->b) < 0)) {
            snprintf(err, errlen, "'%s': bad parameter", d->text);
            return TB_E_INVAL;
        }
        if (d->kind == SIM_DIST_UNIFORM && d->b < d->a) {
            snprintf(err, errlen, "'%s': upper bound below lower bound", d->text);
            return TB_E_INVAL;
        }
        if (d->kind == SIM_DIST_LOGNORMAL && d->a <= 0) {
            snprintf(err, errlen, "'%s': lognormal mean must be positive", d->text);
            return TB_E_INVAL;
        }
        return 0;
    }
    snprintf(err, errlen, "'%s': unknown distribution (const, exp, uniform, lognormal)",
             d->text);
    return TB_E_INVAL;
}
