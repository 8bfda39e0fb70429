/* ports.c - -p HOSTPORT:PORT (HostConfig.PortBindings). */
#include "serve.h"

#include <errno.h>

sv_ports *sv_ports_start(sv_server *s, lis_sandbox *sb, const cJSON *bindings, lis_error *err)
{
    lis_fail(err, ENOTSUP, "port bindings (-p) are not supported by this lis serve yet");
    return NULL;
}

cJSON *sv_ports_json(const sv_ports *p, const cJSON *bindings)
{
    return cJSON_CreateObject();
}

void sv_ports_stop(sv_ports *p)
{
}
