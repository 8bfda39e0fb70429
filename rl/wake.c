/* wake.c - the two ways rl/ says that something changed: to its supervisor
 * (an eventfd it waits on) and to serve/'s requests that wait (the notify
 * callback of lis_rl_opts). */
#include "core.h"

#include <unistd.h>

void rl_wake(lis_rl *rl)
{
    uint64_t one = 1;
    if (write(rl->wake_efd, &one, sizeof one) < 0) { /* EAGAIN: a wake is pending already */
    }
}

void rl_notify(lis_rl *rl)
{
    if (rl->o.notify)
        rl->o.notify(rl->o.notify_arg);
}
