/* score_math.c - the math task's scorer without math-verify (which Debian
 * does not package): the answer's last \boxed{} against the ground truth.
 *
 * original: math/reward.py wraps both in \boxed{}, normalises them (math-verify's
 * normalize_latex) and compares the sympy values: exactly for integers and
 * fractions, rounded to 6 decimals when either side is a decimal number.
 * Here the common part of that is done by hand: a LaTeX normalisation, then
 * a number parser (integers, decimals, \frac, a/b, percentages, a\times10^k)
 * into exact fractions, then the same comparison rule. Anything that is not
 * a number is compared as normalised text (no symbolic algebra); the limits
 * are listed in docs/batch-scoring.md. */
#include "score.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef __int128 i128;

static int starts(const char *p, const char *w) { return strncmp(p, w, strlen(w)) == 0; }

/* The index just past the group that opens at s[i] == '{', or 0. */
static size_t group_end(const char *s, size_t i)
{
    int depth = 0;
    for (size_t k = i; s[k]; k++) {
        if (s[k] == '{')
            depth++;
        else if (s[k] == '}' && --depth == 0)
            return k + 1;
    }
    return 0;
}

/* Commands that only style their argument: \text{cm} and the like. */
static const char *const wrappers[] = {"\\text",       "\\textbf",      "\\textit", "\\textrm",
                                       "\\textnormal", "\\mathrm",      "\\mathbf", "\\mathit",
                                       "\\mbox",       "\\operatorname"};
/* Dropped outright (spacing, sizing, degree signs, dollars). */
static const char *const drops[] = {"\\displaystyle",
                                    "\\qquad",
                                    "\\quad",
                                    "\\mleft",
                                    "\\mright",
                                    "\\left",
                                    "\\right",
                                    "^{\\circ}",
                                    "^\\circ",
                                    "\\circ",
                                    "\\degree",
                                    "\\!",
                                    "\\,",
                                    "\\;",
                                    "\\:",
                                    "\\ ",
                                    "\\$",
                                    "$",
                                    "\xC2\xB0" /* ° */,
                                    "~"};

char *score_math_normalize(const char *latex)
{
    strbuf b = {0};
    const char *s = latex;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        int done = 0;
        for (size_t k = 0; k < sizeof wrappers / sizeof *wrappers && !done; k++) {
            size_t w = strlen(wrappers[k]);
            if (!starts(s + i, wrappers[k]) || s[i + w] != '{')
                continue;
            size_t e = group_end(s, i + w);
            if (!e)
                continue;
            /* a trailing \text{...} after something is a unit: dropped */
            size_t rest = e;
            while (s[rest] == ' ' || s[rest] == '.')
                rest++;
            if (b.len > 0 && !s[rest] && strcmp(wrappers[k], "\\operatorname") != 0) {
                i = n;
            } else {
                char *inner = agent_strndup(s + i + w + 1, e - i - w - 2);
                char *norm = inner ? score_math_normalize(inner) : NULL;
                if (norm)
                    strbuf_puts(&b, norm);
                free(inner);
                free(norm);
                i = e;
            }
            done = 1;
        }
        for (size_t k = 0; k < sizeof drops / sizeof *drops && !done; k++) {
            size_t w = strlen(drops[k]);
            if (starts(s + i, drops[k]) &&
                !(drops[k][0] == '\\' && isalpha((unsigned char)drops[k][1]) &&
                  isalpha((unsigned char)s[i + w]))) {
                i += w;
                done = 1;
            }
        }
        if (done)
            continue;
        if (starts(s + i, "\\dfrac") || starts(s + i, "\\tfrac") || starts(s + i, "\\cfrac")) {
            strbuf_puts(&b, "\\frac");
            i += 6;
        } else if (starts(s + i, "\\sqrt") && s[i + 5] && s[i + 5] != '{' && s[i + 5] != '[' &&
                   !isalpha((unsigned char)s[i + 5]) && !isspace((unsigned char)s[i + 5]) &&
                   s[i + 5] != '\\') {
            /* \sqrt2 -> \sqrt{2} */
            strbuf_printf(&b, "\\sqrt{%c}", s[i + 5]);
            i += 6;
        } else if (starts(s + i, "{,}")) {
            strbuf_putc(&b, ',');
            i += 3;
        } else if (isspace((unsigned char)s[i])) {
            i++;
        } else if (starts(s + i, "\\%")) {
            strbuf_putc(&b, '%');
            i += 2;
        } else if (starts(s + i, "percent") && (i == 0 || !isalpha((unsigned char)s[i - 1]))) {
            strbuf_putc(&b, '%');
            i += 7;
        } else {
            strbuf_putc(&b, s[i++]);
        }
    }
    char *t = strbuf_take(&b);
    if (!t)
        return NULL;
    /* trailing dots, one pair of outer braces, a leading "." */
    size_t len = strlen(t);
    while (len > 0 && t[len - 1] == '.')
        t[--len] = 0;
    while (len >= 2 && t[0] == '{' && group_end(t, 0) == len) {
        memmove(t, t + 1, len - 2);
        len -= 2;
        t[len] = 0;
    }
    if (t[0] == '.' && isdigit((unsigned char)t[1])) {
        char *z = malloc(len + 2);
        if (z) {
            z[0] = '0';
            memcpy(z + 1, t, len + 1);
            free(t);
            t = z;
        }
    }
    return t;
}

/* ---- numbers ------------------------------------------------------------ */

typedef struct num {
    i128 p, q; /* p/q, q > 0 */
    int flt;   /* written with a decimal point: compared rounded to 6 places */
} num;

#define BIG ((i128)1 << 100)

static i128 gcd128(i128 a, i128 b)
{
    if (a < 0)
        a = -a;
    while (b) {
        i128 t = a % b;
        a = b;
        b = t;
    }
    return a ? a : 1;
}

static int reduce(num *v)
{
    if (v->q == 0)
        return -1;
    if (v->q < 0) {
        v->p = -v->p;
        v->q = -v->q;
    }
    i128 g = gcd128(v->p, v->q);
    v->p /= g;
    v->q /= g;
    return (v->p > BIG || v->p < -BIG || v->q > BIG) ? -1 : 0;
}

/* digits with optional 3-digit thousands groups, then .digits */
static int parse_plain(const char *s, size_t *i, num *v)
{
    size_t k = *i;
    i128 p = 0, q = 1;
    int digits = 0;
    while (isdigit((unsigned char)s[k])) {
        if (++digits > 30)
            return -1;
        p = p * 10 + (s[k++] - '0');
    }
    /* 1,000 and 12,345,678: a first group of 1-3 digits, then groups of exactly 3 */
    if (digits >= 1 && digits <= 3 && s[k] == ',')
        while (s[k] == ',' && isdigit((unsigned char)s[k + 1]) &&
               isdigit((unsigned char)s[k + 2]) && isdigit((unsigned char)s[k + 3]) &&
               !isdigit((unsigned char)s[k + 4])) {
            if ((digits += 3) > 30)
                return -1;
            for (int j = 1; j <= 3; j++)
                p = p * 10 + (s[k + j] - '0');
            k += 4;
        }
    int flt = 0;
    if (s[k] == '.' && isdigit((unsigned char)s[k + 1])) {
        flt = 1;
        k++;
        while (isdigit((unsigned char)s[k])) {
            if (++digits > 30)
                return -1;
            p = p * 10 + (s[k] - '0');
            q *= 10;
            k++;
        }
    }
    if (digits == 0)
        return -1;
    /* a \times 10^{k} */
    const char *times[] = {"\\times10^", "\\cdot10^", "*10^"};
    for (size_t t = 0; t < 3; t++) {
        if (!starts(s + k, times[t]))
            continue;
        size_t e = k + strlen(times[t]);
        int neg = 0, br = s[e] == '{';
        if (br)
            e++;
        if (s[e] == '-' || s[e] == '+')
            neg = s[e++] == '-';
        int ex = 0, nd = 0;
        while (isdigit((unsigned char)s[e]) && nd < 3 && (br || nd < 1)) {
            ex = ex * 10 + (s[e++] - '0');
            nd++;
        }
        if (!nd || ex > 30 || (br && s[e++] != '}'))
            return -1;
        for (int j = 0; j < ex; j++) {
            if (neg)
                q *= 10;
            else
                p *= 10;
            if (p > BIG || q > BIG)
                return -1;
        }
        k = e;
        break;
    }
    /* an integer power of an integer: 10^{3}, 2^5 */
    if (s[k] == '^' && !flt && q == 1) {
        size_t e = k + 1;
        int br = s[e] == '{', ex = 0, nd = 0;
        if (br)
            e++;
        while (isdigit((unsigned char)s[e]) && nd < 2 && (br || nd < 1)) {
            ex = ex * 10 + (s[e++] - '0');
            nd++;
        }
        if (nd && (!br || s[e] == '}')) {
            i128 base = p;
            p = 1;
            for (int j = 0; j < ex; j++) {
                p *= base;
                if (p > BIG || p < -BIG)
                    return -1;
            }
            k = e + (br ? 1 : 0);
        }
    }
    v->p = p;
    v->q = q;
    v->flt = flt;
    *i = k;
    return reduce(v);
}

static int parse_num(const char *s, size_t *i, num *v);

/* \frac{A}{B}, or \frac12 (one digit each) */
static int parse_frac(const char *s, size_t *i, num *v)
{
    size_t k = *i + 5;
    num a, b;
    if (isdigit((unsigned char)s[k]) && isdigit((unsigned char)s[k + 1])) {
        a = (num){s[k] - '0', 1, 0};
        b = (num){s[k + 1] - '0', 1, 0};
        k += 2;
    } else {
        for (int part = 0; part < 2; part++) {
            num *x = part ? &b : &a;
            if (s[k] == '{') {
                size_t e = group_end(s, k), j = k + 1;
                if (!e || parse_num(s, &j, x) || j != e - 1)
                    return -1;
                k = e;
            } else if (isdigit((unsigned char)s[k])) {
                *x = (num){s[k++] - '0', 1, 0};
            } else {
                return -1;
            }
        }
    }
    if (b.p == 0)
        return -1;
    v->p = a.p * b.q;
    v->q = a.q * b.p;
    v->flt = a.flt || b.flt;
    *i = k;
    return reduce(v);
}

/* [+-] (\frac | plain [/ plain]) [%] */
static int parse_num(const char *s, size_t *i, num *v)
{
    size_t k = *i;
    int neg = 0;
    while (s[k] == '-' || s[k] == '+')
        neg ^= s[k++] == '-';
    if (s[k] == '(' || s[k] == '{') { /* (-3) or {-3} */
        size_t e = s[k] == '{'          ? group_end(s, k)
                   : strchr(s + k, ')') ? (size_t)(strchr(s + k, ')') - s) + 1
                                        : 0;
        size_t j = k + 1;
        if (!e || parse_num(s, &j, v) || j != e - 1)
            return -1;
        k = e;
    } else if (starts(s + k, "\\frac")) {
        if (parse_frac(s, &k, v))
            return -1;
    } else {
        if (parse_plain(s, &k, v))
            return -1;
        if (s[k] == '/') {
            num d;
            k++;
            if (parse_plain(s, &k, &d) || d.p == 0)
                return -1;
            v->p *= d.q;
            v->q *= d.p;
            v->flt |= d.flt;
            if (reduce(v))
                return -1;
        }
    }
    if (s[k] == '%') {
        v->q *= 100;
        k++;
        if (reduce(v))
            return -1;
    }
    if (neg)
        v->p = -v->p;
    *i = k;
    return 0;
}

static int whole_num(const char *s, num *v)
{
    size_t i = 0;
    return *s && parse_num(s, &i, v) == 0 && s[i] == 0 ? 0 : -1;
}

/* p/q * 10^6 rounded half away from zero */
static i128 round6(const num *v)
{
    i128 p = v->p * 1000000, q = v->q;
    i128 a = p < 0 ? -p : p, r = (2 * a + q) / (2 * q);
    return p < 0 ? -r : r;
}

static int num_eq(const num *a, const num *b)
{
    if (a->flt || b->flt)
        return round6(a) == round6(b);
    return a->p == b->p && a->q == b->q; /* both reduced */
}

/* "x=5" -> "5" (the last relation's right-hand side) */
static const char *rhs(const char *s)
{
    const char *e = strrchr(s, '=');
    return e ? e + 1 : s;
}

static int lhs_is_symbol(const char *s)
{
    const char *e = strchr(s, '=');
    if (!e || e == s)
        return 0;
    for (const char *p = s; p < e; p++)
        if (!isalpha((unsigned char)*p) && *p != '_' && *p != '\\' && !isdigit((unsigned char)*p))
            return 0;
    return isalpha((unsigned char)s[0]) || s[0] == '\\';
}

double score_math(const char *answer, const char *ground_truth)
{
    if (!answer || !ground_truth)
        return 0.0;
    char *ext = score_extract_boxed(answer);
    /* twice: a second pass sees what the first one joined (\sqrt 2 -> \sqrt2 -> \sqrt{2}) */
    char *p1 = ext ? score_math_normalize(ext) : NULL, *g1 = score_math_normalize(ground_truth);
    char *pred = p1 ? score_math_normalize(p1) : NULL, *gold = g1 ? score_math_normalize(g1) : NULL;
    free(p1);
    free(g1);
    double score = 0.0;
    if (pred && gold && *gold) {
        /* math-verify follows the gold's form: an equation in the prediction
         * is unwrapped to its right-hand side when the gold is a value, and
         * an assignment in the gold (x=5) when the prediction is a value */
        const char *g = gold, *p = pred;
        int geq = strchr(g, '=') != NULL, peq = strchr(p, '=') != NULL;
        if (peq && !geq)
            p = rhs(p);
        else if (geq && !peq && lhs_is_symbol(g))
            g = rhs(g);
        num a, b;
        if (whole_num(g, &a) == 0 && whole_num(p, &b) == 0)
            score = num_eq(&a, &b) ? 1.0 : 0.0;
        else
            score = strcmp(g, p) == 0 ? 1.0 : 0.0;
    }
    free(ext);
    free(pred);
    free(gold);
    return score;
}
