/* caps.c - cut the capability bounding set to Docker's default set.
 * Runs in the sandbox child between clone and exec: no allocation. */
#include "internal.h"

#include <errno.h>
#include <sys/capability.h>

/* Docker's default capabilities. Everything else leaves the bounding set, so
 * no process in the sandbox can ever regain it (uid 0 inside included). */
static const cap_value_t keep[] = {
    CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_MKNOD, CAP_NET_RAW,
    CAP_SETGID, CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP, CAP_NET_BIND_SERVICE,
    CAP_SYS_CHROOT, CAP_KILL, CAP_AUDIT_WRITE,
};

int lis_caps_drop_to_default(void)
{
    int max = cap_max_bits();
    for (cap_value_t c = 0; c < max; c++) {
        int kept = 0;
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
            kept |= keep[i] == c;
        if (!kept && cap_drop_bound(c) < 0 && errno != EINVAL)
            return -errno;
    }
    if (cap_reset_ambient() < 0 && errno != EINVAL)
        return -errno;
    return 0;
}
