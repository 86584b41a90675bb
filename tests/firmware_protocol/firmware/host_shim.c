/* host_shim.c - the firmware's state machine (joint_module.c) as a host shared library for the tests (ctypes):
 * jm_send records the frames; offsets of jm_t for the layout check. */
#include <stddef.h>
#include <string.h>

#include "joint_module.h"

#define SHIM_MAX_FRAMES 256u

static jm_frame_t sent[SHIM_MAX_FRAMES];
static unsigned n_sent;

void jm_send(const jm_frame_t *frame) {
    if (n_sent < SHIM_MAX_FRAMES) sent[n_sent++] = *frame;
}

/* Copy the frames sent since the last call (at most max) and forget them; returns how many. */
unsigned shim_take_frames(jm_frame_t *out, unsigned max) {
    unsigned n = n_sent < max ? n_sent : max;
    memcpy(out, sent, n * sizeof *out);
    n_sent = 0;
    return n;
}

unsigned shim_module_size(void) { return (unsigned)sizeof(jm_t); }
unsigned shim_frame_size(void) { return (unsigned)sizeof(jm_frame_t); }

#define OFFSET(field) \
    if (strcmp(name, #field) == 0) return (int)offsetof(jm_t, field)
int shim_offset(const char *name) {
    OFFSET(node); OFFSET(state); OFFSET(estop); OFFSET(fault); OFFSET(watchdog); OFFSET(sequence_valid);
    OFFSET(last_sequence); OFFSET(at_limit); OFFSET(saturated); OFFSET(tick); OFFSET(last_valid_tick);
    OFFSET(watchdog_trip_tick); OFFSET(accepted_references); OFFSET(ignored_while_disabled); OFFSET(watchdog_trips);
    OFFSET(parameter_writes_accepted); OFFSET(unknown_frames); OFFSET(rejected); OFFSET(parameter); OFFSET(axis);
    return -1;
}

#define AXIS_OFFSET(field) \
    if (strcmp(name, #field) == 0) return (int)offsetof(jm_axis_t, field)
int shim_axis_offset(const char *name) {
    AXIS_OFFSET(reference_q8); AXIS_OFFSET(reference_rate_q16); AXIS_OFFSET(rate_q16); AXIS_OFFSET(duty);
    AXIS_OFFSET(feedforward_q4); AXIS_OFFSET(previous_counts); AXIS_OFFSET(limit_q8); AXIS_OFFSET(kp_q12);
    AXIS_OFFSET(error_max_counts); AXIS_OFFSET(kd_q12); AXIS_OFFSET(rate_hi_max);
    return -1;
}

unsigned shim_axis_size(void) { return (unsigned)sizeof(jm_axis_t); }
