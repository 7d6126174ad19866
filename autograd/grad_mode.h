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

/* TG_NO_GRAD { ... }: records nothing inside (torch.no_grad). Same rule as TG_SCOPE:
 * no return/break/goto out of the block. */
#define TG_NO_GRAD_CONCAT2(a, b) a##b
#define TG_NO_GRAD_CONCAT(a, b) TG_NO_GRAD_CONCAT2(a, b)
#define TG_NO_GRAD                                                                          \
    for (int TG_NO_GRAD_CONCAT(tg_prev_grad_, __LINE__) = tg_set_grad_enabled(false) ? 3 : 2; \
         TG_NO_GRAD_CONCAT(tg_prev_grad_, __LINE__) > 1;                                    \
         tg_set_grad_enabled(TG_NO_GRAD_CONCAT(tg_prev_grad_, __LINE__) == 3),              \
             TG_NO_GRAD_CONCAT(tg_prev_grad_, __LINE__) = 0)

/* torch.autograd.set_detect_anomaly: backward checks every gradient a node produces
 * and fails naming the first node (op, sequence number, input shapes) that gives
 * NaN/Inf. Also on when the environment has TG_DETECT_ANOMALY=1. Process-wide. */
void tg_set_detect_anomaly(bool on);
bool tg_is_anomaly_enabled(void);

#ifdef __cplusplus
}
#endif
#endif
