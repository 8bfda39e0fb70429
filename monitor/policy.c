/* policy.c - the policy file (YAML through libyaml's document API): parsed,
 * validated, every error one line "FILE:LINE: what is wrong". The language
 * is in docs/monitoring.md. */
#include "monitor.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define POLICY_FILE_MAX (1u << 20)
#define POLICY_RULES_MAX 256
#define POLICY_GLOB_MAX 512
#define POLICY_EXCEPT_MAX 64

static const char *const kind_names[] = {
    [MR_EXEC] = "exec",
    [MR_WRITE] = "write",
    [MR_DELETE] = "delete",
    [MR_RENAME] = "rename",
    [MR_CONNECT] = "connect",
    [MR_PROCESSES] = "processes",
    [MR_BYTES_WRITTEN] = "bytes_written",
    [MR_BYTES_FETCHED] = "bytes_fetched",
    [MR_IDLE_STEPS] = "idle_steps",
};

const char *mon_rule_kind_name(mon_rule_kind k)
{
    switch (k) {
    case MR_EXEC:
    case MR_WRITE:
    case MR_DELETE:
    case MR_RENAME:
    case MR_CONNECT:
    case MR_PROCESSES:
    case MR_BYTES_WRITTEN:
    case MR_BYTES_FETCHED:
    case MR_IDLE_STEPS: return kind_names[k];
    }
    return "?";
}

const char *lis_policy_action_name(lis_policy_action a)
{
    switch (a) {
    case LIS_ACT_NONE: return "none";
    case LIS_ACT_FLAG: return "flag";
    case LIS_ACT_DENY: return "deny";
    case LIS_ACT_PAUSE: return "pause";
    case LIS_ACT_STOP: return "stop";
    }
    return "?";
}

static int is_threshold(mon_rule_kind k) { return k >= MR_PROCESSES; }

struct parse {
    yaml_document_t *doc;
    const char *name;
    lis_error *err;
};

static int fail_at(struct parse *ps, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(struct parse *ps, const yaml_node_t *n, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return lis_fail(ps->err, EINVAL, "%s:%zu: %s", ps->name, n ? n->start_mark.line + 1 : 1, what);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int glob_value(struct parse *ps, const yaml_node_t *v, const char *key, char **out)
{
    const char *s = scalar(v);
    if (!s || !*s)
        return fail_at(ps, v, "'%s' must be a non-empty pattern", key);
    if (strlen(s) > POLICY_GLOB_MAX)
        return fail_at(ps, v, "'%s' is longer than %d bytes", key, POLICY_GLOB_MAX);
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20)
            return fail_at(ps, v, "'%s' holds a control character", key);
    if (!(*out = strdup(s)))
        return lis_oom(ps->err);
    return 0;
}

static int parse_except(struct parse *ps, const yaml_node_t *v, mon_rule *r)
{
    if (scalar(v)) {
        if (!(r->except = calloc(1, sizeof *r->except)))
            return lis_oom(ps->err);
        r->nexcept = 1;
        return glob_value(ps, v, "except", &r->except[0]);
    }
    if (v->type != YAML_SEQUENCE_NODE)
        return fail_at(ps, v, "'except' must be a pattern or a list of patterns");
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n > POLICY_EXCEPT_MAX)
        return fail_at(ps, v, "'except' has more than %d patterns", POLICY_EXCEPT_MAX);
    if (n && !(r->except = calloc(n, sizeof *r->except)))
        return lis_oom(ps->err);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = yaml_document_get_node(ps->doc, v->data.sequence.items.start[i]);
        if (glob_value(ps, it, "except", &r->except[i]) < 0)
            return -1;
        r->nexcept = i + 1;
    }
    return 0;
}

static int parse_uint(struct parse *ps, const yaml_node_t *v, uint64_t *out)
{
    const char *s = scalar(v);
    if (!s || !*s || strlen(s) > 19)
        return fail_at(ps, v, "'above' must be a whole number >= 0");
    for (const char *c = s; *c; c++)
        if (!isdigit((unsigned char)*c))
            return fail_at(ps, v, "'above' must be a whole number >= 0, not '%s'", s);
    *out = strtoull(s, NULL, 10);
    return 0;
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 63)
        return 0;
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("-_.", *c))
            return 0;
    return 1;
}

static int parse_rule(struct parse *ps, const yaml_node_t *node, mon_rule *r, const mon_rule *prev,
                      size_t nprev)
{
    if (node->type != YAML_MAPPING_NODE)
        return fail_at(ps, node, "a rule must be a mapping (name:, on:, action:, ...)");
    r->line = (int)node->start_mark.line + 1;
    const yaml_node_t *k_on = NULL, *k_action = NULL, *k_name = NULL, *k_above = NULL;
    const yaml_node_t *k_pat[3] = {NULL, NULL, NULL}; /* path argv host */
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(ps->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(ps->doc, p->value);
        const char *key = scalar(k);
        if (!key)
            return fail_at(ps, k, "a rule's keys are words (name, on, action, ...)");
        if (!strcmp(key, "name"))
            k_name = v;
        else if (!strcmp(key, "on"))
            k_on = v;
        else if (!strcmp(key, "action"))
            k_action = v;
        else if (!strcmp(key, "above"))
            k_above = v;
        else if (!strcmp(key, "path"))
            k_pat[0] = v;
        else if (!strcmp(key, "argv"))
            k_pat[1] = v;
        else if (!strcmp(key, "host"))
            k_pat[2] = v;
        else if (!strcmp(key, "except")) {
            if (r->except)
                return fail_at(ps, k, "'except' given twice");
            if (parse_except(ps, v, r) < 0)
                return -1;
        } else
            return fail_at(ps, k,
                           "unknown key '%s' in a rule (known: name, on, path, argv, host, "
                           "except, above, action)",
                           key);
    }
    if (!k_name)
        return fail_at(ps, node, "a rule needs a name");
    const char *name = scalar(k_name);
    if (!name || !valid_name(name))
        return fail_at(ps, k_name, "a rule's name is 1-63 letters, digits, '-', '_' or '.'");
    for (size_t i = 0; i < nprev; i++)
        if (!strcmp(prev[i].name, name))
            return fail_at(ps, k_name, "rule name '%s' is already used (line %d)", name,
                           prev[i].line);
    snprintf(r->name, sizeof r->name, "%s", name);
    if (!k_on)
        return fail_at(ps, node,
                       "rule '%s' needs 'on' (exec, write, delete, rename, connect, "
                       "processes, bytes_written, bytes_fetched, idle_steps)",
                       name);
    const char *on = scalar(k_on);
    int kind = -1;
    for (size_t i = 0; on && i < sizeof kind_names / sizeof kind_names[0]; i++)
        if (!strcmp(on, kind_names[i]))
            kind = (int)i;
    if (kind < 0)
        return fail_at(ps, k_on,
                       "rule '%s': unknown 'on: %s' (exec, write, delete, rename, connect, "
                       "processes, bytes_written, bytes_fetched, idle_steps)",
                       name, on ? on : "(not a word)");
    r->kind = (mon_rule_kind)kind;
    if (!k_action)
        return fail_at(ps, node, "rule '%s' needs 'action' (flag, deny, pause, stop)", name);
    const char *act = scalar(k_action);
    static const lis_policy_action acts[] = {LIS_ACT_FLAG, LIS_ACT_DENY, LIS_ACT_PAUSE,
                                             LIS_ACT_STOP};
    for (size_t i = 0; act && i < 4; i++)
        if (!strcmp(act, lis_policy_action_name(acts[i])))
            r->action = acts[i];
    if (r->action == LIS_ACT_NONE)
        return fail_at(ps, k_action, "rule '%s': unknown action '%s' (flag, deny, pause, stop)",
                       name, act ? act : "(not a word)");
    if (r->action == LIS_ACT_DENY && r->kind != MR_EXEC && r->kind != MR_CONNECT &&
        r->kind != MR_WRITE)
        return fail_at(ps, k_action,
                       "rule '%s': deny applies to exec, connect and write only (a %s cannot be "
                       "undone; use flag, pause or stop)",
                       name, on);
    static const char *const pat_keys[] = {"path", "argv", "host"};
    int want[3] = {r->kind == MR_EXEC || (r->kind >= MR_WRITE && r->kind <= MR_RENAME),
                   r->kind == MR_EXEC, r->kind == MR_CONNECT};
    char **dst[3] = {&r->path, &r->argv, &r->host};
    for (int i = 0; i < 3; i++) {
        if (!k_pat[i])
            continue;
        if (!want[i])
            return fail_at(ps, k_pat[i], "rule '%s': '%s' does not apply to 'on: %s'", name,
                           pat_keys[i], on);
        if (glob_value(ps, k_pat[i], pat_keys[i], dst[i]) < 0)
            return -1;
    }
    if (r->kind == MR_EXEC && !r->path && !r->argv)
        return fail_at(ps, node, "rule '%s': 'on: exec' needs 'path' or 'argv'", name);
    if (r->kind >= MR_WRITE && r->kind <= MR_RENAME && !r->path)
        return fail_at(ps, node, "rule '%s': 'on: %s' needs 'path'", name, on);
    if (r->kind == MR_CONNECT && !r->host)
        return fail_at(ps, node, "rule '%s': 'on: connect' needs 'host'", name);
    for (const char *c = r->host; c && *c; c++) /* what the proxy's domain rules take */
        if (!isalnum((unsigned char)*c) && !strchr(".-_*?[]:", *c))
            return fail_at(ps, k_pat[2],
                           "rule '%s': a host pattern holds letters, digits and . - _ * ? [ ] : "
                           "only",
                           name);
    if (is_threshold(r->kind)) {
        if (!k_above)
            return fail_at(ps, node, "rule '%s': 'on: %s' needs 'above: N'", name, on);
        if (parse_uint(ps, k_above, &r->above) < 0)
            return -1;
        if (r->except)
            return fail_at(ps, node, "rule '%s': 'except' does not apply to 'on: %s'", name, on);
    } else if (k_above) {
        return fail_at(ps, k_above, "rule '%s': 'above' applies to thresholds only", name);
    }
    return 0;
}

static void rule_release(mon_rule *r)
{
    free(r->path);
    free(r->argv);
    free(r->host);
    for (size_t i = 0; i < r->nexcept; i++)
        free(r->except[i]);
    free(r->except);
}

void lis_policy_free(lis_policy *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        rule_release(&p->rules[i]);
    free(p->rules);
    free(p->deny_domains);
    free(p->exec_allow);
    free(p->exec_allow_text);
    free(p->write_allow);
    free(p->write_allow_text);
    free(p->file);
    free(p);
}

/* The directory an except glob names when it is DIR followed by /STAR or a plain path
 * (its length; 0 when it has other glob characters: not a Landlock rule). */
static size_t allow_prefix(const char *g)
{
    size_t n = strlen(g);
    if (n >= 2 && !strcmp(g + n - 2, "/*"))
        n -= 2;
    if (!n || g[0] != '/' || strcspn(g, "*?[\\") < n)
        return 0;
    return n;
}

/* Whether r is an allow-list: deny everything ('*' or '/STAR') but its except
 * list, with no argv glob. */
static int is_allow_list(const mon_rule *r)
{
    return r->action == LIS_ACT_DENY && !r->argv && r->nexcept && r->path &&
           (!strcmp(r->path, "*") || !strcmp(r->path, "/*"));
}

/* The paths of the first allow-list rule of kind k when each exception is
 * a directory (DIR followed by /STAR) or a file: what Landlock can enforce
 * (runtime/landlock.c). -1 out of memory. */
static int plan_allow(lis_policy *pol, mon_rule_kind k, char ***out, char **out_text,
                      lis_error *err)
{
    for (size_t i = 0; i < pol->n; i++) {
        const mon_rule *r = &pol->rules[i];
        if (r->kind != k || !is_allow_list(r))
            continue;
        size_t total = 0;
        for (size_t e = 0; e < r->nexcept; e++) {
            size_t n = allow_prefix(r->except[e]);
            if (!n)
                return 0; /* not expressible: the hub alone checks it */
            total += n + 1;
        }
        char **list = calloc(r->nexcept + 1, sizeof *list);
        char *text = list ? calloc(1, total) : NULL;
        *out = list;
        if (!text)
            return lis_oom(err);
        *out_text = text;
        for (size_t e = 0; e < r->nexcept; e++) {
            size_t n = allow_prefix(r->except[e]);
            memcpy(text, r->except[e], n);
            list[e] = text;
            text += n + 1;
        }
        return 0;
    }
    return 0;
}

static int parse_doc(struct parse *ps, lis_policy *pol)
{
    yaml_node_t *root = yaml_document_get_root_node(ps->doc);
    if (!root)
        return fail_at(ps, NULL, "the policy is empty (it needs 'rules:')");
    if (root->type != YAML_MAPPING_NODE)
        return fail_at(ps, root, "the policy must be a mapping with 'rules:'");
    yaml_node_t *rules = NULL;
    pol->on_unknown = LIS_ACT_FLAG;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(ps->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(ps->doc, p->value);
        const char *key = scalar(k);
        if (key && !strcmp(key, "rules")) {
            rules = v;
        } else if (key && !strcmp(key, "version")) {
            const char *ver = scalar(v);
            if (!ver || strcmp(ver, "1"))
                return fail_at(ps, v, "unsupported policy version '%s' (this lis reads 1)",
                               ver ? ver : "?");
        } else if (key && !strcmp(key, "on_unknown")) {
            /* what a rule that cannot be evaluated does (a cut record, an
             * unresolved exec, a scan past its bound): never a silent pass */
            const char *w = scalar(v);
            if (w && !strcmp(w, "alert"))
                pol->on_unknown = LIS_ACT_FLAG;
            else if (w && !strcmp(w, "stop"))
                pol->on_unknown = LIS_ACT_STOP;
            else
                return fail_at(ps, v, "on_unknown is 'alert' or 'stop', not '%s'",
                               w ? w : "(not a word)");
        } else {
            return fail_at(ps, k, "unknown key '%s' at the top (known: version, rules, on_unknown)",
                           key ? key : "(not a word)");
        }
    }
    if (!rules)
        return fail_at(ps, root, "the policy has no 'rules:'");
    if (rules->type != YAML_SEQUENCE_NODE)
        return fail_at(ps, rules, "'rules' must be a list of rules");
    size_t n = (size_t)(rules->data.sequence.items.top - rules->data.sequence.items.start);
    if (n > POLICY_RULES_MAX)
        return fail_at(ps, rules, "more than %d rules", POLICY_RULES_MAX);
    if (n && !(pol->rules = calloc(n, sizeof *pol->rules)))
        return lis_oom(ps->err);
    size_t ndeny = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = yaml_document_get_node(ps->doc, rules->data.sequence.items.start[i]);
        pol->n = i + 1; /* so that a half-made rule is freed */
        if (parse_rule(ps, it, &pol->rules[i], pol->rules, i) < 0)
            return -1;
        ndeny += pol->rules[i].kind == MR_CONNECT && pol->rules[i].action == LIS_ACT_DENY;
    }
    if (!(pol->deny_domains = calloc(ndeny + 1, sizeof *pol->deny_domains)))
        return lis_oom(ps->err);
    ndeny = 0;
    for (size_t i = 0; i < n; i++)
        if (pol->rules[i].kind == MR_CONNECT && pol->rules[i].action == LIS_ACT_DENY)
            pol->deny_domains[ndeny++] = pol->rules[i].host;
    for (size_t i = 0; i < n; i++) {
        const mon_rule *r = &pol->rules[i];
        int ok = r->kind != MR_WRITE || r->action != LIS_ACT_DENY || is_allow_list(r);
        for (size_t e = 0; ok && r->kind == MR_WRITE && r->action == LIS_ACT_DENY && e < r->nexcept;
             e++)
            ok = allow_prefix(r->except[e]) > 0;
        if (!ok)
            return lis_fail(ps->err, EINVAL,
                            "%s:%d: rule '%s': a write is denied by the kernel (Landlock) before "
                            "it happens, so a write deny is an allow-list: path: '*' and an "
                            "except list of DIR/* or plain paths",
                            ps->name, r->line, r->name);
    }
    if (plan_allow(pol, MR_EXEC, &pol->exec_allow, &pol->exec_allow_text, ps->err) < 0)
        return -1;
    return plan_allow(pol, MR_WRITE, &pol->write_allow, &pol->write_allow_text, ps->err);
}

lis_policy *lis_policy_parse(const char *text, size_t len, const char *name, lis_error *err)
{
    lis_policy *pol = calloc(1, sizeof *pol);
    if (!pol || !(pol->file = strdup(name ? name : "policy"))) {
        free(pol);
        lis_oom(err);
        return NULL;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        lis_policy_free(pol);
        lis_oom(err);
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = lis_fail(err, EINVAL, "%s:%zu: %s", pol->file,
                      (parser.problem_mark.line ? parser.problem_mark.line
                                                : parser.context_mark.line) +
                          1,
                      parser.problem ? parser.problem : "malformed YAML");
    } else {
        struct parse ps = {&doc, pol->file, err};
        rc = parse_doc(&ps, pol);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    if (rc < 0) {
        lis_policy_free(pol);
        return NULL;
    }
    return pol;
}

lis_policy *lis_policy_load(const char *path, lis_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        lis_fail_errno(err, "%s: cannot read the policy", path);
        return NULL;
    }
    char *buf = malloc(POLICY_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, POLICY_FILE_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        lis_oom(err);
        return NULL;
    }
    lis_policy *p = NULL;
    if (bad)
        lis_fail(err, EIO, "%s: cannot read the policy", path);
    else if (n > POLICY_FILE_MAX)
        lis_fail(err, EFBIG, "%s: a policy is at most %u bytes", path, POLICY_FILE_MAX);
    else if (memchr(buf, 0, n))
        lis_fail(err, EINVAL, "%s:1: the policy holds a NUL byte", path);
    else
        p = lis_policy_parse(buf, n, path, err);
    free(buf);
    return p;
}

size_t lis_policy_rules(const lis_policy *p) { return p ? p->n : 0; }

const char *const *lis_policy_exec_allow(const lis_policy *p)
{
    return p && p->exec_allow ? (const char *const *)p->exec_allow : NULL;
}

const char *const *lis_policy_write_allow(const lis_policy *p)
{
    return p && p->write_allow ? (const char *const *)p->write_allow : NULL;
}

const char *const *lis_policy_deny_domains(const lis_policy *p)
{
    static const char *const none[] = {NULL};
    return p && p->deny_domains ? (const char *const *)p->deny_domains : none;
}
