/* records.c - the records of a step: their state names and destructors. */
#include "monitor.h"

#include <stdlib.h>

const char *mon_pstate_name(mon_pstate s)
{
    switch (s) {
    case MP_RUNNING: return "running";
    case MP_EXITED: return "exited";
    case MP_KILLED: return "killed";
    case MP_REPLACED: return "exec";
    }
    return "?";
}

void mon_proc_free(mon_proc *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->argv);
    free(p->ref);
    free(p);
}
