/* options.c - every option of a Docker create body is honoured or refused,
 * never silently ignored (docs/serve.md, "Create options").
 *
 * Honoured: Binds, Mounts (bind, tmpfs) and Volumes as bind mounts of host
 * paths the owner can read; Tmpfs; ReadonlyRootfs; ShmSize; Ulimits;
 * CapDrop; CapAdd within Docker's default set (already there); Init (lis-init
 * is always PID 1); Hostname; StopSignal, StopTimeout; ConsoleSize; CpuQuota
 * with CpuPeriod; PidsLimit -1 (no limit). Refused with dockerd's 400
 * {"message"} and one line: what weakens the sandbox (Privileged, CapAdd
 * beyond the default set, Devices, a PidMode/IpcMode/UTSMode/UsernsMode/
 * CgroupnsMode other than private, SecurityOpt other than no-new-privileges,
 * MaskedPaths/ReadonlyPaths set to any list, the empty one of
 * systempaths=unconfined included), what lis has no such thing for (Sysctls,
 * CgroupParent, VolumesFrom, named or anonymous volumes, restart policies,
 * other log drivers, DNS settings, ...), and any other key that is set to
 * something (an unknown key is refused unless it is empty: null, false, 0,
 * "", [] or {}, which is how the docker CLI sends every field it has).
 * NetworkMode host is refused to a client that is not known to be the owner
 * (create.c). */
#include "serve.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- JSON shapes ------------------------------------------------------------------- */

/* null, false, 0, "", or a container of only such values: what the docker CLI
 * sends for every option it was not given. */
static int empty(const cJSON *v)
{
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v))
        return 1;
    if (cJSON_IsNumber(v))
        return v->valuedouble == 0;
    if (cJSON_IsString(v))
        return !v->valuestring[0];
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        for (const cJSON *e = v->child; e; e = e->next)
            if (!empty(e))
                return 0;
        return 1;
    }
    return 0;
}

static int fail(char *msg, size_t mlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t mlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, mlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- capabilities --------------------------------------------------------------------- */

/* Docker's default set (runtime/init/harden.c gives commands no more). */
static const struct {
    const char *name;
    int cap;
} default_caps[] = {{"CHOWN", CAP_CHOWN},
                    {"DAC_OVERRIDE", CAP_DAC_OVERRIDE},
                    {"FSETID", CAP_FSETID},
                    {"FOWNER", CAP_FOWNER},
                    {"MKNOD", CAP_MKNOD},
                    {"NET_RAW", CAP_NET_RAW},
                    {"SETGID", CAP_SETGID},
                    {"SETUID", CAP_SETUID},
                    {"SETFCAP", CAP_SETFCAP},
                    {"SETPCAP", CAP_SETPCAP},
                    {"NET_BIND_SERVICE", CAP_NET_BIND_SERVICE},
                    {"SYS_CHROOT", CAP_SYS_CHROOT},
                    {"KILL", CAP_KILL},
                    {"AUDIT_WRITE", CAP_AUDIT_WRITE}};

/* The default capability named n ("CHOWN", "CAP_CHOWN", any case), or -1. */
static int default_cap(const char *n)
{
    if (!strncasecmp(n, "CAP_", 4))
        n += 4;
    for (size_t i = 0; i < sizeof default_caps / sizeof *default_caps; i++)
        if (!strcasecmp(n, default_caps[i].name))
            return default_caps[i].cap;
    return -1;
}

static int caps(sv_copts *o, const cJSON *drop, const cJSON *add, char *msg, size_t mlen)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, drop)
    {
        if (!cJSON_IsString(e))
            return fail(msg, mlen, "CapDrop wants capability names");
        if (!strcasecmp(e->valuestring, "ALL")) {
            for (size_t i = 0; i < sizeof default_caps / sizeof *default_caps; i++)
                o->cap_drop |= 1ull << default_caps[i].cap;
            continue;
        }
        int c = default_cap(e->valuestring);
        if (c < 0) /* not in the default set: nothing to drop, but a typo must not pass */
            return fail(msg, mlen,
                        "CapDrop %s: not one of the capabilities lis gives commands (Docker's "
                        "default set)",
                        e->valuestring);
        o->cap_drop |= 1ull << c;
    }
    cJSON_ArrayForEach(e, add)
    {
        if (!cJSON_IsString(e))
            return fail(msg, mlen, "CapAdd wants capability names");
        int c = default_cap(e->valuestring);
        if (c < 0)
            return fail(msg, mlen,
                        "CapAdd %s is refused: lis gives commands Docker's default capabilities "
                        "at most",
                        e->valuestring);
        if (o->cap_drop & (1ull << c)) /* Docker: an added capability wins over a drop */
            o->cap_drop &= ~(1ull << c);
    }
    return 0;
}

/* ---- mounts ----------------------------------------------------------------------------- */

/* A target inside the container: absolute, no "..", not / and not in /proc,
 * /sys or /dev (lis's own mounts), not one already taken. */
static int target_ok(const sv_copts *o, const char *t, char *msg, size_t mlen)
{
    if (t[0] != '/' || strlen(t) >= PATH_MAX)
        return fail(msg, mlen, "invalid mount config: the mount point %s must be an absolute path",
                    t);
    for (const char *p = t; *p;) {
        while (*p == '/')
            p++;
        const char *e = strchrnul(p, '/');
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return fail(msg, mlen, "invalid mount config: %s may not contain '..'", t);
        p = e;
    }
    static const char *const own[] = {"/proc", "/sys", "/dev"};
    if (!t[strspn(t, "/")])
        return fail(msg, mlen, "invalid mount config: destination can't be '/'");
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(own[i]);
        if (!strncmp(t, own[i], n) && (!t[n] || t[n] == '/'))
            return fail(msg, mlen, "invalid mount config: %s is lis's own (%s)", t, own[i]);
    }
    for (size_t i = 0; i < o->nbinds; i++)
        if (!strcmp(o->binds[i].path, t))
            return fail(msg, mlen, "Duplicate mount point: %s", t);
    for (size_t i = 0; i < o->ntmpfs; i++)
        if (!strcmp(o->tmpfs[i].path, t))
            return fail(msg, mlen, "Duplicate mount point: %s", t);
    return 0;
}

/* A bind of host path src (the owner's: absolute, existing, readable; a
 * symlink is followed on the host, where it is the owner's own) at dst. */
static int add_bind(sv_copts *o, const char *src, const char *dst, int ro, char *msg, size_t mlen)
{
    if (o->nbinds == SV_MAX_BINDS)
        return fail(msg, mlen, "at most %d bind mounts", SV_MAX_BINDS);
    if (src[0] != '/')
        return fail(msg, mlen,
                    "%s is a named volume: lis serve has no volumes (bind a host directory: "
                    "-v /host/dir:%s)",
                    src, dst);
    if (target_ok(o, dst, msg, mlen) < 0)
        return -1;
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(src, real) || stat(real, &st) < 0)
        return fail(msg, mlen,
                    "invalid mount config for type \"bind\": bind source path does not "
                    "exist: %s",
                    src);
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISSOCK(st.st_mode))
        return fail(msg, mlen,
                    "bind source %s: only directories, files and sockets are bound "
                    "(devices are refused)",
                    src);
    if (access(real, S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK) < 0)
        return fail(msg, mlen,
                    "bind source %s: %s (the owner of lis serve must be able to read it)", src,
                    strerror(errno));
    char *h = strdup(real), *p = strdup(dst);
    if (!h || !p) {
        free(h);
        free(p);
        return fail(msg, mlen, "out of memory");
    }
    o->binds[o->nbinds++] = (lis_bind){.host_path = h, .path = p, .read_only = ro};
    return 0;
}

/* A size of a tmpfs, bounded by the container's writable budget (a tmpfs is RAM). */
static int bounded_size(uint64_t size, uint64_t budget, const char *what, char *msg, size_t mlen)
{
    if (budget != LIS_UNLIMITED && size > budget)
        return fail(msg, mlen,
                    "%s: %llu bytes is more than the container's writable budget of %llu "
                    "(lis serve --disk)",
                    what, (unsigned long long)size, (unsigned long long)budget);
    return 0;
}

static int add_tmpfs(sv_copts *o, const char *dst, uint64_t size, unsigned mode, int ro, int noexec,
                     uint64_t budget, char *msg, size_t mlen)
{
    if (o->ntmpfs == SV_MAX_TMPFS)
        return fail(msg, mlen, "at most %d tmpfs mounts", SV_MAX_TMPFS);
    if (target_ok(o, dst, msg, mlen) < 0 || bounded_size(size, budget, "tmpfs size", msg, mlen) < 0)
        return -1;
    char *p = strdup(dst);
    if (!p)
        return fail(msg, mlen, "out of memory");
    o->tmpfs[o->ntmpfs++] =
        (lis_tmpfs){.path = p, .size = size, .mode = mode, .read_only = ro, .noexec = noexec};
    return 0;
}

/* A size: bytes, or N[kmg] (Docker's units, 1024-based). */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    uint64_t mul = 1;
    switch (tolower((unsigned char)*end)) {
    case 0: break;
    case 'k': mul = 1024; break;
    case 'm': mul = 1024 * 1024; break;
    case 'g': mul = 1024ull * 1024 * 1024; break;
    default: return -1;
    }
    if (errno || end == s || (*end && end[1] && strcasecmp(end + 1, "b")) || n > UINT64_MAX / mul)
        return -1;
    *out = n * mul;
    return 0;
}

/* HostConfig.Tmpfs {"/run": "rw,noexec,size=64m,mode=1777"}. */
static int tmpfs_map(sv_copts *o, const cJSON *map, uint64_t budget, char *msg, size_t mlen)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, map)
    {
        if (!cJSON_IsString(e) && !cJSON_IsNull(e))
            return fail(msg, mlen, "Tmpfs %s: the options must be a string", e->string);
        uint64_t size = 0;
        unsigned mode = 0;
        int ro = 0, noexec = 0;
        char opts[512];
        snprintf(opts, sizeof opts, "%s", cJSON_IsString(e) ? e->valuestring : "");
        char *save = NULL;
        for (char *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *end;
            if (!strcmp(t, "ro") || !strcmp(t, "rw"))
                ro = t[0] == 'r' && t[1] == 'o';
            else if (!strcmp(t, "noexec") || !strcmp(t, "exec"))
                noexec = t[0] == 'n';
            else if (!strcmp(t, "nosuid") || !strcmp(t, "nodev"))
                ; /* always so */
            else if (!strncmp(t, "size=", 5) && parse_size(t + 5, &size) == 0)
                ;
            else if (!strncmp(t, "mode=", 5) && (mode = (unsigned)strtoul(t + 5, &end, 8), !*end) &&
                     mode <= 07777)
                ;
            else
                return fail(msg, mlen,
                            "Tmpfs %s: option '%s' is not supported (ro, rw, exec, noexec, nosuid, "
                            "nodev, size=, mode=)",
                            e->string, t);
        }
        if (add_tmpfs(o, e->string, size, mode, ro, noexec, budget, msg, mlen) < 0)
            return -1;
    }
    return 0;
}

/* HostConfig.Binds ["/host:/ctr[:ro|rw|z|Z,...]"]. */
static int binds(sv_copts *o, const cJSON *list, char *msg, size_t mlen)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        if (!cJSON_IsString(e))
            return fail(msg, mlen, "Binds wants \"HOST:CONTAINER[:OPTIONS]\" strings");
        char spec[2 * PATH_MAX];
        snprintf(spec, sizeof spec, "%s", e->valuestring);
        char *dst = strchr(spec, ':');
        if (!dst)
            return fail(msg, mlen,
                        "Binds %s: an anonymous volume; lis serve has no volumes (bind a host "
                        "directory: -v /host/dir:%s, or --tmpfs %s)",
                        spec, spec, spec);
        *dst++ = 0;
        char *opts = strchr(dst, ':');
        if (opts)
            *opts++ = 0;
        int ro = 0;
        char *save = NULL;
        for (char *t = opts ? strtok_r(opts, ",", &save) : NULL; t;
             t = strtok_r(NULL, ",", &save)) {
            if (!strcmp(t, "ro") || !strcmp(t, "rw"))
                ro = t[1] == 'o';
            else if (strcmp(t, "z") && strcmp(t, "Z") && strcmp(t, "rprivate") &&
                     strcmp(t, "private"))
                /* z/Z: no SELinux labels to change; propagation stays private */
                return fail(msg, mlen,
                            "Binds %s: option '%s' is not supported (ro, rw; propagation is "
                            "always private)",
                            e->valuestring, t);
        }
        if (add_bind(o, spec, dst, ro, msg, mlen) < 0)
            return -1;
    }
    return 0;
}

/* HostConfig.Mounts [{"Type": "bind"|"tmpfs", "Source", "Target", "ReadOnly", ...}]. */
static int mounts(sv_copts *o, const cJSON *list, uint64_t budget, char *msg, size_t mlen)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, list)
    {
        const char *type = sv_jstr(m, "Type"), *src = sv_jstr(m, "Source"),
                   *dst = sv_jstr(m, "Target");
        int ro = sv_jbool(m, "ReadOnly");
        if (!type || !dst)
            return fail(msg, mlen, "Mounts: each needs a Type and a Target");
        const cJSON *bo = cJSON_GetObjectItemCaseSensitive(m, "BindOptions"),
                    *to = cJSON_GetObjectItemCaseSensitive(m, "TmpfsOptions");
        const char *prop = sv_jstr(bo, "Propagation");
        if (!strcmp(type, "bind")) {
            if (!src)
                return fail(msg, mlen, "Mounts %s: a bind needs a Source", dst);
            if ((prop && strcmp(prop, "rprivate") && strcmp(prop, "private")) ||
                sv_jbool(bo, "NonRecursive") || sv_jbool(bo, "CreateMountpoint") ||
                !empty(cJSON_GetObjectItemCaseSensitive(m, "VolumeOptions")) || !empty(to))
                return fail(msg, mlen,
                            "Mounts %s: only ReadOnly is supported for a bind (propagation is "
                            "always private, binds recursive)",
                            dst);
            if (add_bind(o, src, dst, ro, msg, mlen) < 0)
                return -1;
        } else if (!strcmp(type, "tmpfs")) {
            if (src || !empty(bo) || !empty(cJSON_GetObjectItemCaseSensitive(m, "VolumeOptions")))
                return fail(msg, mlen, "Mounts %s: a tmpfs has no Source and no bind options", dst);
            double size = sv_jnum(to, "SizeBytes"), mode = sv_jnum(to, "Mode");
            if (size < 0 || mode < 0 || mode > 07777)
                return fail(msg, mlen, "Mounts %s: TmpfsOptions out of range", dst);
            if (add_tmpfs(o, dst, (uint64_t)size, (unsigned)mode, ro, 0, budget, msg, mlen) < 0)
                return -1;
        } else if (!strcmp(type, "volume")) {
            return fail(msg, mlen,
                        "Mounts %s: lis serve has no volumes (a bind of a host directory, or a "
                        "tmpfs)",
                        dst);
        } else {
            return fail(msg, mlen, "Mounts %s: type %s is not supported (bind, tmpfs)", dst, type);
        }
    }
    return 0;
}

/* ---- ulimits --------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int res;
} ulimit_names[] = {{"core", RLIMIT_CORE},         {"cpu", RLIMIT_CPU},
                    {"data", RLIMIT_DATA},         {"fsize", RLIMIT_FSIZE},
                    {"locks", RLIMIT_LOCKS},       {"memlock", RLIMIT_MEMLOCK},
                    {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE},
                    {"nofile", RLIMIT_NOFILE},     {"nproc", RLIMIT_NPROC},
                    {"rss", RLIMIT_RSS},           {"rtprio", RLIMIT_RTPRIO},
                    {"rttime", RLIMIT_RTTIME},     {"sigpending", RLIMIT_SIGPENDING},
                    {"stack", RLIMIT_STACK}};

static int ulimits(sv_copts *o, const cJSON *list, char *msg, size_t mlen)
{
    const cJSON *u;
    cJSON_ArrayForEach(u, list)
    {
        const char *name = sv_jstr(u, "Name");
        const cJSON *soft = cJSON_GetObjectItemCaseSensitive(u, "Soft"),
                    *hard = cJSON_GetObjectItemCaseSensitive(u, "Hard");
        int res = -1;
        for (size_t i = 0; name && i < sizeof ulimit_names / sizeof *ulimit_names; i++)
            if (!strcmp(name, ulimit_names[i].name))
                res = ulimit_names[i].res;
        if (res < 0)
            return fail(msg, mlen,
                        "Ulimits: '%s' is not a resource limit (nofile, nproc, core, ...)",
                        name ? name : "");
        if (!cJSON_IsNumber(soft) || !cJSON_IsNumber(hard) || soft->valuedouble < -1 ||
            hard->valuedouble < -1)
            return fail(msg, mlen, "Ulimits %s: Soft and Hard must be numbers (-1: unlimited)",
                        name);
        uint64_t s = soft->valuedouble < 0 ? LIS_UNLIMITED : (uint64_t)soft->valuedouble;
        uint64_t h = hard->valuedouble < 0 ? LIS_UNLIMITED : (uint64_t)hard->valuedouble;
        if (s > h)
            return fail(msg, mlen, "Ulimits %s: the soft limit is above the hard one", name);
        struct rlimit own;
        if (getrlimit(res, &own) == 0 && own.rlim_max != RLIM_INFINITY &&
            (h == LIS_UNLIMITED || h > (uint64_t)own.rlim_max))
            return fail(msg, mlen,
                        "Ulimits %s: a hard limit above lis serve's own (%llu) cannot be set "
                        "without root",
                        name, (unsigned long long)own.rlim_max);
        if (o->nrlimits == LIS_MAX_RLIMITS)
            return fail(msg, mlen, "at most %d Ulimits", LIS_MAX_RLIMITS);
        o->rlimits[o->nrlimits++] = (lis_rlimit){.resource = res, .soft = s, .hard = h};
    }
    return 0;
}

/* ---- the options --------------------------------------------------------------------- */

/* A key of the body with a value that is refused whatever it is, unless empty. */
static const struct {
    const char *key, *why;
} refused[] = {
    {"Privileged", "a privileged container is not given by lis (Docker's default capabilities "
                   "and seccomp filter always apply)"},
    {"Devices", "devices are not given to containers by lis"},
    {"DeviceRequests", "devices (GPUs) are not given to containers by lis"},
    {"DeviceCgroupRules", "devices are not given to containers by lis"},
    {"Sysctls", "sysctls are not set by lis"},
    {"CgroupParent", "lis places each container's cgroup itself"},
    {"VolumesFrom", "lis serve has no volumes to share"},
    {"VolumeDriver", "lis serve has no volumes"},
    {"Links", "lis serve has no container networks to link"},
    {"ExtraHosts", "/etc/hosts is lis's own"},
    {"Dns", "DNS is lis's own (--net proxy resolves names)"},
    {"DnsOptions", "DNS is lis's own (--net proxy resolves names)"},
    {"DnsSearch", "DNS is lis's own (--net proxy resolves names)"},
    {"GroupAdd", "supplementary groups are not supported (User with a numeric group)"},
    {"OomScoreAdj", "the OOM score is lis's own"},
    {"OomKillDisable", "the OOM killer is not disabled by lis"},
    {"PublishAllPorts", "publish each port with PortBindings (-p HOSTPORT:PORT)"},
    {"MaskedPaths", "lis always masks its own set of /proc and /sys paths"},
    {"ReadonlyPaths", "lis always makes its own set of /proc and /sys paths read-only"},
    {"StorageOpt", "storage options are not supported"},
    {"Capabilities", "use CapDrop"},
    {"CpuShares", "CPU is bounded by NanoCpus (--cpus)"},
    {"CpusetCpus", "CPU is bounded by NanoCpus (--cpus)"},
    {"CpusetMems", "CPU is bounded by NanoCpus (--cpus)"},
    {"CpuCount", "CPU is bounded by NanoCpus (--cpus)"},
    {"CpuPercent", "CPU is bounded by NanoCpus (--cpus)"},
    {"CpuRealtimePeriod", "realtime scheduling is not given"},
    {"CpuRealtimeRuntime", "realtime scheduling is not given"},
    {"MemoryReservation", "memory is bounded by Memory (--memory)"},
    {"KernelMemory", "memory is bounded by Memory (--memory)"},
    {"KernelMemoryTCP", "memory is bounded by Memory (--memory)"},
    {"BlkioWeight", "block I/O weights are not set by lis"},
    {"BlkioWeightDevice", "block I/O weights are not set by lis"},
    {"BlkioDeviceReadBps", "block I/O limits are not set by lis"},
    {"BlkioDeviceWriteBps", "block I/O limits are not set by lis"},
    {"BlkioDeviceReadIOps", "block I/O limits are not set by lis"},
    {"BlkioDeviceWriteIOps", "block I/O limits are not set by lis"},
    {"IOMaximumIOps", "I/O limits are not set by lis"},
    {"IOMaximumBandwidth", "I/O limits are not set by lis"},
    {"Runtime", "lis is the runtime"},
    {"Cgroup", "lis places each container's cgroup itself"},
};

/* Keys read elsewhere (create.c, containers.c, inspect.c) or checked below,
 * and those that carry no behaviour (labels, the client's own settings). */
static const char *const hc_known[] = {"AutoRemove",     "NetworkMode",      "PortBindings",
                                       "Memory",         "PidsLimit",        "NanoCpus",
                                       "Binds",          "Mounts",           "Tmpfs",
                                       "ReadonlyRootfs", "ShmSize",          "Ulimits",
                                       "CapDrop",        "CapAdd",           "Init",
                                       "ConsoleSize",    "CpuQuota",         "CpuPeriod",
                                       "MemorySwap",     "MemorySwappiness", "PidMode",
                                       "IpcMode",        "UTSMode",          "UsernsMode",
                                       "CgroupnsMode",   "SecurityOpt",      "RestartPolicy",
                                       "LogConfig",      "Isolation",        "ContainerIDFile",
                                       "Annotations",    "OomKillDisable"};

/* Lis*: the native API's (api.c, state.c) */
static const char *const cfg_known[] =
    {"Hostname",         "User",         "AttachStdin", "AttachStdout",
     "AttachStderr",     "ExposedPorts", "Tty",         "OpenStdin",
     "StdinOnce",        "Env",          "Cmd",         "Image",
     "Volumes",          "WorkingDir",   "Entrypoint",  "NetworkDisabled",
     "Labels",           "StopSignal",   "StopTimeout", "HostConfig",
     "Healthcheck",      "ArgsEscaped",  "OnBuild",     "Shell",
     "NetworkingConfig", "Domainname",   "MacAddress",  "LisTimeout",
     "LisEffects",       "LisPolicy",    "LisForkOf",   "Platform"};

static int known(const char *const *list, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], key))
            return 1;
    return 0;
}

/* "" or "private" (and what is private in effect: IpcMode shareable, which no
 * other container can join here). */
static int namespaces(const cJSON *hc, char *msg, size_t mlen)
{
    static const char *const keys[] = {"PidMode", "IpcMode", "UTSMode", "UsernsMode",
                                       "CgroupnsMode"};
    for (size_t i = 0; i < 5; i++) {
        const char *v = sv_jstr(hc, keys[i]);
        if (v && strcmp(v, "private") && !(i == 1 && !strcmp(v, "shareable")))
            return fail(msg, mlen,
                        "%s %s is refused: every lis container has private namespaces of its own",
                        keys[i], v);
    }
    return 0;
}

/* MaskedPaths, ReadonlyPaths: absent or null is Docker's default set; any
 * list replaces it (a non-empty one is refused with the table above), and []
 * is what `--security-opt systempaths=unconfined` sends (the docker CLI turns
 * the option into these two), which the table takes for unset. lis always
 * masks its own set, so [] would be silently ignored: refused instead. */
static int system_paths(const cJSON *hc, char *msg, size_t mlen)
{
    static const char *const keys[] = {"MaskedPaths", "ReadonlyPaths"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(hc, keys[i]);
        if (v && !cJSON_IsNull(v))
            return fail(msg, mlen,
                        "HostConfig.%s is refused (--security-opt systempaths=unconfined "
                        "sends it empty): lis always masks and makes read-only its own set of "
                        "/proc and /sys paths",
                        keys[i]);
    }
    return 0;
}

static int security_opts(const cJSON *list, char *msg, size_t mlen)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        const char *v = cJSON_IsString(e) ? e->valuestring : "";
        if (!strcmp(v, "no-new-privileges") || !strcmp(v, "no-new-privileges:true") ||
            !strcmp(v, "no-new-privileges=true"))
            continue; /* always so (prctl PR_SET_NO_NEW_PRIVS) */
        return fail(msg, mlen,
                    "SecurityOpt %s is refused: lis's seccomp filter and hardening always apply "
                    "(only no-new-privileges, which is always on, is accepted)",
                    v);
    }
    return 0;
}

int sv_options_parse(sv_copts *o, const cJSON *cfg, uint64_t budget, char *msg, size_t mlen)
{
    memset(o, 0, sizeof *o);
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(cfg, "HostConfig"), *e;
    if (hc && !cJSON_IsObject(hc) && !cJSON_IsNull(hc))
        return fail(msg, mlen, "HostConfig must be an object");
    cJSON_ArrayForEach(e, hc)
    {
        for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
            if (!strcmp(e->string, refused[i].key) && !empty(e))
                return fail(msg, mlen, "HostConfig.%s is refused: %s", e->string, refused[i].why);
        int ok = known(hc_known, sizeof hc_known / sizeof *hc_known, e->string);
        for (size_t i = 0; !ok && i < sizeof refused / sizeof *refused; i++)
            ok = !strcmp(e->string, refused[i].key);
        if (!ok && !empty(e))
            return fail(msg, mlen, "HostConfig.%s is not supported by lis serve (docs/serve.md)",
                        e->string);
    }
    cJSON_ArrayForEach(e, cfg)
    {
        if (!known(cfg_known, sizeof cfg_known / sizeof *cfg_known, e->string) && !empty(e))
            return fail(msg, mlen, "%s is not supported by lis serve (docs/serve.md)", e->string);
    }
    /* what the sandbox would not be, or lis has nothing for */
    const char *rp = sv_jstr(cJSON_GetObjectItemCaseSensitive(hc, "RestartPolicy"), "Name");
    const char *log = sv_jstr(cJSON_GetObjectItemCaseSensitive(hc, "LogConfig"), "Type");
    const char *iso = sv_jstr(hc, "Isolation");
    double swap = sv_jnum(hc, "MemorySwap"), mem = sv_jnum(hc, "Memory");
    const cJSON *swappy = cJSON_GetObjectItemCaseSensitive(hc, "MemorySwappiness");
    const cJSON *hck = cJSON_GetObjectItemCaseSensitive(cfg, "Healthcheck");
    const cJSON *test = cJSON_GetObjectItemCaseSensitive(hck, "Test");
    if (rp && strcmp(rp, "no"))
        return fail(msg, mlen, "RestartPolicy %s is refused: lis serve does not restart containers",
                    rp);
    if (log && strcmp(log, "json-file"))
        return fail(msg, mlen,
                    "LogConfig %s is refused: lis serve keeps the main command's first 8 MiB "
                    "(json-file)",
                    log);
    if (iso && strcmp(iso, "default"))
        return fail(msg, mlen, "Isolation %s is refused", iso);
    if (swap != 0 && swap != -1 && swap != mem)
        return fail(msg, mlen, "MemorySwap is refused: lis gives no swap beyond Memory");
    if (swappy && !cJSON_IsNull(swappy) && !(cJSON_IsNumber(swappy) && swappy->valuedouble == -1))
        return fail(msg, mlen, "MemorySwappiness is refused: lis does not set it");
    if (!empty(hck) && !(cJSON_GetArraySize(test) == 1 && cJSON_IsString(test->child) &&
                         !strcmp(test->child->valuestring, "NONE")))
        return fail(msg, mlen, "Healthcheck is refused: lis serve does not run health checks");
    if (sv_jstr(cfg, "Domainname") || sv_jstr(cfg, "MacAddress"))
        return fail(msg, mlen, "%s is refused: a container's network is lis's own",
                    sv_jstr(cfg, "Domainname") ? "Domainname" : "MacAddress");
    /* NetworkingConfig: checked with NetworkMode (networks.c, sv_net_check_create) */
    if (namespaces(hc, msg, mlen) < 0 || system_paths(hc, msg, mlen) < 0 ||
        security_opts(cJSON_GetObjectItemCaseSensitive(hc, "SecurityOpt"), msg, mlen) < 0 ||
        caps(o, cJSON_GetObjectItemCaseSensitive(hc, "CapDrop"),
             cJSON_GetObjectItemCaseSensitive(hc, "CapAdd"), msg, mlen) < 0 ||
        binds(o, cJSON_GetObjectItemCaseSensitive(hc, "Binds"), msg, mlen) < 0 ||
        mounts(o, cJSON_GetObjectItemCaseSensitive(hc, "Mounts"), budget, msg, mlen) < 0 ||
        tmpfs_map(o, cJSON_GetObjectItemCaseSensitive(hc, "Tmpfs"), budget, msg, mlen) < 0 ||
        ulimits(o, cJSON_GetObjectItemCaseSensitive(hc, "Ulimits"), msg, mlen) < 0)
        goto fail;
    /* Volumes: the targets of the binds and mounts above (docker-py lists them);
     * any other is an anonymous volume, which lis has not */
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cfg, "Volumes"))
    {
        int bound = 0;
        for (size_t i = 0; i < o->nbinds && !bound; i++)
            bound = !strcmp(o->binds[i].path, e->string);
        for (size_t i = 0; i < o->ntmpfs && !bound; i++)
            bound = !strcmp(o->tmpfs[i].path, e->string);
        if (!bound) {
            fail(msg, mlen,
                 "Volumes %s: an anonymous volume; lis serve has no volumes (bind a host "
                 "directory: -v /host/dir:%s, or --tmpfs %s)",
                 e->string, e->string, e->string);
            goto fail;
        }
    }
    o->read_only_root = sv_jbool(hc, "ReadonlyRootfs");
    const cJSON *shm = cJSON_GetObjectItemCaseSensitive(hc, "ShmSize");
    if (shm && !cJSON_IsNull(shm) && !(cJSON_IsNumber(shm) && shm->valuedouble >= 0)) {
        fail(msg, mlen, "ShmSize must be bytes");
        goto fail;
    }
    o->shm_bytes = cJSON_IsNumber(shm) ? (uint64_t)shm->valuedouble : 0;
    if (bounded_size(o->shm_bytes, budget, "ShmSize", msg, mlen) < 0)
        goto fail;
    const char *host = sv_jstr(cfg, "Hostname");
    if (host) {
        size_t n = strlen(host);
        int bad = n > 63 || !isalnum((unsigned char)host[0]);
        for (size_t i = 0; !bad && i < n; i++)
            bad = !isalnum((unsigned char)host[i]) && host[i] != '-' && host[i] != '.';
        if (bad) {
            fail(msg, mlen, "invalid hostname format: %s", host);
            goto fail;
        }
        snprintf(o->hostname, sizeof o->hostname, "%s", host);
    }
    const char *sig = sv_jstr(cfg, "StopSignal");
    snprintf(o->stop_signal, sizeof o->stop_signal, "%s", sig ? sig : "");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(cfg, "StopTimeout");
    o->stop_timeout = cJSON_IsNumber(st) && st->valuedouble >= 0 ? st->valuedouble : -1;
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(hc, "ConsoleSize");
    if (cJSON_GetArraySize(cs) == 2 && cJSON_IsNumber(cs->child) &&
        cJSON_IsNumber(cs->child->next)) {
        double h = cs->child->valuedouble, w = cs->child->next->valuedouble;
        o->rows = h > 0 && h < 65536 ? (unsigned short)h : 0;
        o->cols = w > 0 && w < 65536 ? (unsigned short)w : 0;
    }
    return 0;
fail:
    sv_options_release(o);
    return -1;
}

void sv_options_release(sv_copts *o)
{
    for (size_t i = 0; i < o->nbinds; i++) {
        free((char *)o->binds[i].host_path);
        free((char *)o->binds[i].path);
    }
    for (size_t i = 0; i < o->ntmpfs; i++)
        free((char *)o->tmpfs[i].path);
    o->nbinds = o->ntmpfs = 0;
}

void sv_options_spec(const sv_copts *o, lis_sandbox_spec *spec)
{
    spec->binds = o->binds;
    spec->nbinds = o->nbinds;
    spec->tmpfs = o->tmpfs;
    spec->ntmpfs = o->ntmpfs;
    spec->read_only_root = o->read_only_root;
    spec->shm_bytes = o->shm_bytes;
    spec->rlimits = o->rlimits;
    spec->nrlimits = o->nrlimits;
    spec->cap_drop = o->cap_drop;
    if (o->hostname[0])
        spec->hostname = o->hostname;
    /* lis serve --disk N: the writable layer is a tmpfs of N (min. the memory
     * limit under the fallback limits), so the kernel holds the total against
     * any number of writers (ENOSPC), at the cost of RAM for what is written.
     * Without it, the disk layer's 1 GiB default is checked after the fact by
     * PID 1 (init/diskwatch.c), which fast parallel writers overshoot (issue
     * 29; docs/serve.md). */
    if (spec->limits.disk_bytes && spec->limits.disk_bytes != LIS_UNLIMITED)
        spec->upper = LIS_UPPER_TMPFS;
}

cJSON *sv_options_mounts(const sv_copts *o)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < o->nbinds; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "Type", "bind");
        cJSON_AddStringToObject(m, "Source", o->binds[i].host_path);
        cJSON_AddStringToObject(m, "Destination", o->binds[i].path);
        cJSON_AddStringToObject(m, "Mode", o->binds[i].read_only ? "ro" : "");
        cJSON_AddBoolToObject(m, "RW", !o->binds[i].read_only);
        cJSON_AddStringToObject(m, "Propagation", "rprivate");
        cJSON_AddItemToArray(a, m);
    }
    for (size_t i = 0; a && i < o->ntmpfs; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "Type", "tmpfs");
        cJSON_AddStringToObject(m, "Source", "");
        cJSON_AddStringToObject(m, "Destination", o->tmpfs[i].path);
        cJSON_AddStringToObject(m, "Mode", "");
        cJSON_AddBoolToObject(m, "RW", !o->tmpfs[i].read_only);
        cJSON_AddStringToObject(m, "Propagation", "");
        cJSON_AddItemToArray(a, m);
    }
    return a;
}
