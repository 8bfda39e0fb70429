/* score_text.c - the rule-based text scorers in C: the demo's
 * case-insensitive match and the chem/biomed multiple-choice letter cascade.
 * original: the demo, chem and biomed tasks' reward.py.
 *
 * original: its regexes run on Python str, so the text is decoded to code
 * points here (invalid UTF-8 becomes U+FFFD, as a 'replace' decode) and
 * Python's notions are reproduced: str.strip() whitespace, \b and \w on
 * Unicode word characters (alphanumerics and '_'), str.upper()/lower() per
 * code point (glibc's C.UTF-8 tables; Python's few one-to-many mappings such
 * as 'ß' -> 'SS' are not reproduced). */
#include "score.h"

#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

/* The C.UTF-8 character tables, loaded once and then only read. */
static locale_t utf8_loc;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void utf8_init(void) { utf8_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }
static locale_t loc(void)
{
    pthread_once(&utf8_once, utf8_init);
    return utf8_loc;
}

typedef struct ustr {
    uint32_t *c;
    size_t n;
} ustr;

static ustr decode(const char *s)
{
    size_t len = strlen(s);
    ustr u = {malloc((len + 1) * sizeof(uint32_t)), 0};
    if (!u.c)
        return u;
    const unsigned char *p = (const unsigned char *)s, *e = p + len;
    while (p < e) {
        uint32_t c = *p;
        int more = c < 0x80             ? 0
                   : (c & 0xE0) == 0xC0 ? 1
                   : (c & 0xF0) == 0xE0 ? 2
                   : (c & 0xF8) == 0xF0 ? 3
                                        : -1;
        if (more < 0 || e - p <= more) {
            u.c[u.n++] = 0xFFFD;
            p++;
            continue;
        }
        c = more == 0 ? c : more == 1 ? c & 0x1F : more == 2 ? c & 0x0F : c & 0x07;
        int ok = 1;
        for (int i = 1; i <= more; i++) {
            if ((p[i] & 0xC0) != 0x80) {
                ok = 0;
                break;
            }
            c = (c << 6) | (p[i] & 0x3F);
        }
        if (!ok || (more == 1 && c < 0x80) || (more == 2 && c < 0x800) ||
            (more == 3 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF)) {
            u.c[u.n++] = 0xFFFD;
            p++;
            continue;
        }
        u.c[u.n++] = c;
        p += more + 1;
    }
    return u;
}

static size_t encode1(uint32_t c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Python's str.isspace(). */
static int py_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

static int py_alpha(uint32_t c)
{
    if (c < 0x80)
        return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    locale_t l = loc();
    return l ? iswalpha_l((wint_t)c, l) != 0 : 0;
}

/* re's \w on str: alphanumerics and '_'. */
static int py_word(uint32_t c)
{
    if (c < 0x80)
        return c == '_' || (c >= '0' && c <= '9') || py_alpha(c);
    locale_t l = loc();
    return l ? iswalnum_l((wint_t)c, l) != 0 : 0;
}

static uint32_t py_upper(uint32_t c)
{
    if (c < 0x80)
        return c >= 'a' && c <= 'z' ? c - 32 : c;
    locale_t l = loc();
    return l ? (uint32_t)towupper_l((wint_t)c, l) : c;
}

static uint32_t py_lower(uint32_t c)
{
    if (c < 0x80)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    locale_t l = loc();
    return l ? (uint32_t)towlower_l((wint_t)c, l) : c;
}

/* [b, e) of u after str.strip() */
static void strip(const ustr *u, size_t *b, size_t *e)
{
    *b = 0;
    *e = u->n;
    while (*b < *e && py_space(u->c[*b]))
        (*b)++;
    while (*e > *b && py_space(u->c[*e - 1]))
        (*e)--;
}

/* a.strip().upper() == b.strip().upper() (or lower()) */
static int fold_eq(const ustr *a, const ustr *b, int upper)
{
    size_t ab, ae, bb, be;
    strip(a, &ab, &ae);
    strip(b, &bb, &be);
    if (ae - ab != be - bb)
        return 0;
    for (size_t i = 0; i < ae - ab; i++) {
        uint32_t x = a->c[ab + i], y = b->c[bb + i];
        if (upper ? py_upper(x) != py_upper(y) : py_lower(x) != py_lower(y))
            return 0;
    }
    return 1;
}

double score_match(const char *answer, const char *ground_truth)
{
    if (!answer || !*answer || !ground_truth || !*ground_truth)
        return 0.0;
    ustr a = decode(answer), g = decode(ground_truth);
    int eq = a.c && g.c && fold_eq(&a, &g, 0);
    free(a.c);
    free(g.c);
    return eq ? 1.0 : 0.0;
}

/* ---- the letter cascade ------------------------------------------------- */

static int ascii_letter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static int boundary_after(const ustr *u, size_t i) { return i >= u->n || !py_word(u->c[i]); }
static size_t skip_space(const ustr *u, size_t i)
{
    while (i < u->n && py_space(u->c[i]))
        i++;
    return i;
}

/* Case-insensitive ASCII literal at i; returns the index after it or 0. */
static size_t lit(const ustr *u, size_t i, const char *w)
{
    for (; *w; w++, i++)
        if (i >= u->n || py_lower(u->c[i]) != (uint32_t)*w)
            return 0;
    return i;
}

/* The letter matched by one method at start position i, or 0. */
static uint32_t m_json(const ustr *u, size_t i) /* "answer"\s*:\s*"([A-Z])" */
{
    size_t j = lit(u, i, "\"answer\"");
    if (!j)
        return 0;
    j = skip_space(u, j);
    if (j >= u->n || u->c[j] != ':')
        return 0;
    j = skip_space(u, j + 1);
    if (j + 2 >= u->n || u->c[j] != '"' || !ascii_letter(u->c[j + 1]) || u->c[j + 2] != '"')
        return 0;
    return u->c[j + 1];
}

static uint32_t m_colon(const ustr *u, size_t i) /* answer\s*[:：]\s*([A-Z])\b */
{
    size_t j = lit(u, i, "answer");
    if (!j)
        return 0;
    j = skip_space(u, j);
    if (j >= u->n || (u->c[j] != ':' && u->c[j] != 0xFF1A))
        return 0;
    j = skip_space(u, j + 1);
    if (j >= u->n || !ascii_letter(u->c[j]) || !boundary_after(u, j + 1))
        return 0;
    return u->c[j];
}

static uint32_t m_is(const ustr *u, size_t i) /* (?:answer|choice)\s+is\s+([A-Z])\b */
{
    size_t j = lit(u, i, "answer");
    if (!j)
        j = lit(u, i, "choice");
    if (!j || j >= u->n || !py_space(u->c[j]))
        return 0;
    j = skip_space(u, j);
    size_t k = lit(u, j, "is");
    if (!k || k >= u->n || !py_space(u->c[k]))
        return 0;
    k = skip_space(u, k);
    if (k >= u->n || !ascii_letter(u->c[k]) || !boundary_after(u, k + 1))
        return 0;
    return u->c[k];
}

static uint32_t search(const ustr *u, uint32_t (*m)(const ustr *, size_t))
{
    for (size_t i = 0; i < u->n; i++) {
        uint32_t c = m(u, i);
        if (c)
            return c;
    }
    return 0;
}

char *score_extract_boxed(const char *text)
{
    static const char pre[] = "\\boxed{";
    const char *last = NULL;
    for (const char *p = strstr(text, pre); p; p = strstr(p + 1, pre))
        last = p;
    const char *b = text, *e = text + strlen(text);
    if (last) {
        const char *s = last + strlen(pre), *i = s;
        int depth = 1;
        while (*i && depth > 0) {
            if (*i == '{')
                depth++;
            else if (*i == '}')
                depth--;
            i++;
        }
        if (depth == 0) {
            b = s;
            e = i - 1;
        }
    }
    char *raw = agent_strndup(b, (size_t)(e - b));
    if (!raw)
        return NULL;
    ustr u = decode(raw);
    free(raw);
    if (!u.c)
        return NULL;
    size_t sb, se;
    strip(&u, &sb, &se);
    char *out = malloc((se - sb) * 4 + 1);
    if (out) {
        size_t n = 0;
        for (size_t k = sb; k < se; k++)
            n += encode1(u.c[k], out + n);
        out[n] = 0;
    }
    free(u.c);
    return out;
}

static uint32_t letter_cascade(const char *text)
{
    if (!*text)
        return 0;
    ustr u = decode(text);
    if (!u.c)
        return 0;
    uint32_t c = search(&u, m_json);
    if (!c)
        c = search(&u, m_colon);
    if (!c)
        c = search(&u, m_is);
    if (c)
        goto done;
    /* \boxed{}: only when boxed content was really extracted */
    char *boxed = score_extract_boxed(text);
    if (boxed) {
        ustr bx = decode(boxed);
        size_t tb, te;
        strip(&u, &tb, &te);
        int same = bx.c && bx.n == te - tb && !memcmp(bx.c, u.c + tb, bx.n * sizeof(uint32_t));
        if (bx.c && !same && bx.n > 0 && py_alpha(bx.c[0]))
            c = bx.c[0];
        free(bx.c);
        free(boxed);
        if (c)
            goto done;
    }
    /* the last standalone A-Z of text.upper() */
    for (size_t i = u.n; i-- > 0;) {
        uint32_t x = py_upper(u.c[i]);
        if (x >= 'A' && x <= 'Z' && (i == 0 || !py_word(py_upper(u.c[i - 1]))) &&
            (i + 1 >= u.n || !py_word(py_upper(u.c[i + 1])))) {
            c = x;
            goto done;
        }
    }
    /* the stripped text starts with a letter */
    size_t sb, se;
    strip(&u, &sb, &se);
    if (sb < se && py_alpha(u.c[sb]))
        c = u.c[sb];
done:
    free(u.c);
    return c ? py_upper(c) : 0;
}

void score_letter_extract(const char *text, char out[8])
{
    uint32_t c = letter_cascade(text ? text : "");
    size_t n = c ? encode1(c, out) : 0;
    out[n] = 0;
}

double score_letter(const char *answer, const char *ground_truth)
{
    if (!answer || !ground_truth)
        return 0.0;
    ustr a = decode(answer), g = decode(ground_truth);
    int eq = 0;
    if (a.c && g.c) {
        eq = fold_eq(&a, &g, 1);
        if (!eq) {
            char letter[8];
            score_letter_extract(answer, letter);
            ustr p = decode(letter);
            eq = p.c && fold_eq(&p, &g, 1);
            free(p.c);
        }
    }
    free(a.c);
    free(g.c);
    return eq ? 1.0 : 0.0;
}
