#include "autograd/grad_mode.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local bool grad_disabled;
static int anomaly = -1; /* -1: not yet read from the environment */

bool tg_is_grad_enabled(void) { return !grad_disabled; }

bool tg_set_grad_enabled(bool enabled) {
    bool previous = !grad_disabled;
    grad_disabled = !enabled;
    return previous;
}

void tg_set_detect_anomaly(bool on) { anomaly = on; }

bool tg_is_anomaly_enabled(void) {
    if (anomaly < 0) {
        const char *env = getenv("TG_DETECT_ANOMALY");
        anomaly = env && strcmp(env, "0") != 0 && env[0] != '\0';
    }
    return anomaly;
}
