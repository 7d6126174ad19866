/* Grad mode and anomaly mode, per thread. */
#ifndef TG_AUTOGRAD_GRAD_MODE_H
#define TG_AUTOGRAD_GRAD_MODE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* torch.is_grad_enabled / torch.set_grad_enabled; returns the previous value. */
bool tg_is_grad_enabled(void);
bool tg_set_grad_enabled(bool enabled);

/* TG_NO_GRAD { ... }: records nothing inside (torch.no_grad). As with TG_SCOPE, the
 * previous grad mode comes back however the block is left (closing brace, return,
 * goto); a `break` or `continue` in it leaves the TG_NO_GRAD block itself. */
#define TG_NO_GRAD_CONCAT2(a, b) a##b
#define TG_NO_GRAD_CONCAT(a, b) TG_NO_GRAD_CONCAT2(a, b)
typedef struct {
    bool prev;
    int once;
} tg_no_grad_guard_;
static inline tg_no_grad_guard_ tg_no_grad_begin_(void) {
    tg_no_grad_guard_ g = {tg_set_grad_enabled(false), 1};
    return g;
}
static inline void tg_no_grad_end_(tg_no_grad_guard_ *g) { tg_set_grad_enabled(g->prev); }
#define TG_NO_GRAD                                                            \
    for (tg_no_grad_guard_ TG_NO_GRAD_CONCAT(tg_no_grad_, __LINE__)           \
             __attribute__((cleanup(tg_no_grad_end_))) = tg_no_grad_begin_(); \
         TG_NO_GRAD_CONCAT(tg_no_grad_, __LINE__).once; TG_NO_GRAD_CONCAT(tg_no_grad_, __LINE__).once = 0)

/* torch.autograd.set_detect_anomaly: backward checks every gradient a node produces
 * and fails naming the first node (op, sequence number, input shapes) that gives
 * NaN/Inf. Also on when the environment has TG_DETECT_ANOMALY=1. Process-wide. */
void tg_set_detect_anomaly(bool on);
bool tg_is_anomaly_enabled(void);

#ifdef __cplusplus
}
#endif
#endif
