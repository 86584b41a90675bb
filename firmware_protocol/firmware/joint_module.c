/* joint_module.c - the joint module's protocol rules and controller (see joint_module.h). */
#include "joint_module.h"

#include <string.h>

#define JM_FIRMWARE_VERSION 1u
#define JM_HEARTBEAT_DIVISOR JM_TICK_HZ /* 1 Hz */

/* Unit conversions (float constants, folded by the compiler; floats run only when a parameter is written). */
#define JM_PI 3.14159265358979f
#define JM_RAD_PER_COUNT (2.0f * JM_PI / (float)JM_ENCODER_COUNTS_PER_REV)
#define JM_V_PER_PWM (JM_SUPPLY_V / (float)JM_PWM_TOP)
#define JM_TICK_S (1.0f / (float)JM_TICK_HZ)
/* gain [V/rad] -> Q12 factor from an error in 1/16 count to a voltage in 1/16 PWM count */
#define JM_KP_TO_Q12 (JM_RAD_PER_COUNT / JM_V_PER_PWM * 4096.0f)
/* gain [V s/rad] -> Q12 factor from a rate in 1/256 count per tick to a voltage in 1/16 PWM count (>> 8) */
/* gain [V s/rad] -> Q12 factor from a rate in 1/65536 count per tick to a voltage in 1/16 PWM count (>> 16) */
#define JM_KD_TO_Q12 (JM_RAD_PER_COUNT / 65536.0f / JM_TICK_S / JM_V_PER_PWM * 16.0f * 65536.0f)
#define JM_BACK_EMF_Q12 ((int32_t)(JM_BACK_EMF_V_S_PER_RAD * JM_KD_TO_Q12 + 0.5f))
#define JM_DEG_TO_Q8 (256.0f * (float)JM_ENCODER_COUNTS_PER_REV / 360.0f)
#define JM_AT_LIMIT_MARGIN_Q8 ((int32_t)(0.5f * JM_DEG_TO_Q8 + 0.5f)) /* 0.5 deg, as the emulator */
/* rate filter: alpha = dt / (dt + 1 / (2 pi f)), Q16 */
#define JM_RATE_ALPHA_Q16 \
    ((int32_t)(65536.0f * JM_TICK_S / (JM_TICK_S + 1.0f / (2.0f * JM_PI * JM_RATE_FILTER_HZ)) + 0.5f))
#define JM_RAW_STEP_MAX 15 /* counts per tick (540 deg/s, 2.7x the motor's no-load speed): a glitch, not motion */
#define JM_DEMAND_SUPPLY_Q4 ((int32_t)JM_PWM_TOP * 16)

static const float jm_defaults[JM_PARAMETER_COUNT] = {
    400.0f, 6.0f, 400.0f, 6.0f,  /* KpH, KdH, KpV, KdV (firmware_protocol.emulator.controller.ControllerGains) */
    90.0f, 90.0f,                /* limits, deg */
    3.0f, 100.0f, 100.0f,        /* watchdog periods, reference period ms, feedback rate Hz */
    2.9232f, 2.9232f, 4.0f,      /* torque limits (0.7 x 300 x 0.0116 N m/A x 1.2 A), free play deg */
};

/* x / 2^shift rounded (half up); always inlined, so that the shift is a constant: a variable 32-bit shift is a loop
 * of one bit per 4-6 cycles on the AVR */
static inline __attribute__((always_inline)) int32_t rshift_round(int32_t x, uint8_t shift) {
    return (x + ((int32_t)1 << (shift - 1u))) >> shift;
}

static int32_t clamp32(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : (x > hi ? hi : x); }


/* x 256 x 10000 / 36000 = x 640 / 9 = x 71 + x 0.1111 (as x 7282 >> 16: within 0.6 of 1/256 count), with no
 * division: a 32-bit division is a library call of ~600 cycles, four per reference */
int32_t jm_cdeg_to_q8(int16_t cdeg) { return (int32_t)cdeg * 71 + rshift_round((int32_t)cdeg * 7282, 16); }

/* counts x 3.6 (36000 cdeg per 10000 counts), rounded: 3 x counts + 0.6 x counts, the 0.6 as x 39322 >> 16 (off by
 * < 0.04 within +-10000 counts; 36 x counts mod 10 is never 5, so a result is never that close to a half: exact,
 * checked over the range by the host tests) and no 32-bit division (a library call of ~600 cycles) */
int16_t jm_counts_to_cdeg(int32_t counts) {
    int32_t c = clamp32(counts, -10000L, 10000L);
    int32_t cdeg = 3 * c + rshift_round(c * 39322L, 16);
    return (int16_t)clamp32(cdeg, -AIKO_ANGLE_CDEG_MAX, AIKO_ANGLE_CDEG_MAX);
}

/* 0.25 deg/s -> 1/65536 count per tick: x 0.25 x 10000 / 360 / 1000 x 65536 = x 4096 / 9 = x 455 + x 0.1111 */
static int32_t qdeg_s_to_q16(int16_t qdeg_s) {
    return (int32_t)qdeg_s * 455 + rshift_round((int32_t)qdeg_s * 7282, 16);
}

/* x * k >> 16, rounded, for |x| up to 2^23 and k up to 2^20: as (x >> 8) * k + (x & 0xFF) * k >> 8, then >> 8,
 * with x >> 8 clamped to +-hi_max so that no product leaves int32 (byte shifts only: see the header) */
static inline __attribute__((always_inline)) int32_t mul_q16(int32_t x, int32_t k, int32_t hi_max) {
    int32_t hi = x >> 8;
    if (hi > hi_max) hi = hi_max;
    if (hi < -hi_max) hi = -hi_max;
    return rshift_round(hi * k + rshift_round((x & 0xFF) * k, 8), 8);
}

int32_t jm_pot_to_counts(uint16_t adc) {
    float deg = ((float)adc + 0.5f) * (JM_POT_SPAN_DEG / 1023.0f) - 0.5f * JM_POT_SPAN_DEG; /* mid-step */
    float counts = deg * (float)JM_ENCODER_COUNTS_PER_REV / 360.0f;
    return (int32_t)(counts >= 0.0f ? counts + 0.5f : counts - 0.5f);
}

/* ------------------------------------------------------------------ parameters */
static void derive(jm_t *jm, uint8_t index) {
#define p jm->parameter
    switch (index) {
        case AIKO_PARAM_KP_H:
        case AIKO_PARAM_KP_V: {
            uint8_t axis = index == AIKO_PARAM_KP_H ? 0u : 1u;
            int32_t k = (int32_t)(p[index - 1u] * JM_KP_TO_Q12 + 0.5f);
            jm->axis[axis].kp_q12 = k > 0 ? k : 1;
            jm->axis[axis].error_max_counts = (INT32_MAX - (1L << 22)) / jm->axis[axis].kp_q12;
            break;
        }
        case AIKO_PARAM_KD_H:
        case AIKO_PARAM_KD_V: {
            uint8_t axis = index == AIKO_PARAM_KD_H ? 0u : 1u;
            int32_t k = (int32_t)(p[index - 1u] * JM_KD_TO_Q12 + 0.5f);
            jm->axis[axis].kd_q12 = k;
            jm->axis[axis].rate_hi_max = k > 0 ? (INT32_MAX - (1L << 21)) / k : INT32_MAX;
            break;
        }
        case AIKO_PARAM_LIMIT_H_DEG:
        case AIKO_PARAM_LIMIT_V_DEG:
            jm->axis[index - AIKO_PARAM_LIMIT_H_DEG].limit_q8 = (int32_t)(p[index - 1u] * JM_DEG_TO_Q8 + 0.5f);
            break;
        case AIKO_PARAM_WATCHDOG_PERIODS:
        case AIKO_PARAM_REFERENCE_PERIOD_MS: {
            /* the rule's float32 product, in ticks: trip once more ticks than the timeout have passed */
            float timeout_ms = p[AIKO_PARAM_WATCHDOG_PERIODS - 1u] * p[AIKO_PARAM_REFERENCE_PERIOD_MS - 1u];
            jm->watchdog_limit_ticks = (uint16_t)(timeout_ms * ((float)JM_TICK_HZ / 1000.0f));
            break;
        }
        case AIKO_PARAM_FEEDBACK_RATE_HZ: {
            float rate = p[index - 1u];
            if (!(rate > 0.0f)) {
                jm->feedback_divisor = 0u;
            } else { /* round half to even, as numpy's round in the emulator */
                float q = (float)JM_TICK_HZ / rate;
                float r = (float)(uint32_t)(q + 0.5f);
                if (r - q == 0.5f && ((uint32_t)r & 1u)) r -= 1.0f;
                jm->feedback_divisor = r < 1.0f ? 1u : (r > 65535.0f ? 65535u : (uint16_t)r);
            }
            jm->feedback_phase = jm->feedback_divisor ? (uint16_t)(jm->tick % jm->feedback_divisor) : 0u;
            break;
        }
        default:
            break;
    }
#undef p
}

/* A stored value the firmware accepts: what a write while disabled would accept, the watchdog pair as stored. */
static uint8_t stored_value_ok(uint8_t index, const float values[JM_PARAMETER_COUNT]) {
    float value = values[index - 1u];
    if (index >= AIKO_PARAM_TORQUE_LIMIT_H_NM) return (uint8_t)(value >= 0.0f && value <= 1000.0f);
    return (uint8_t)(aiko_parameter_write_result(AIKO_STATE_DISABLED, index, value,
                                                 values[AIKO_PARAM_WATCHDOG_PERIODS - 1u],
                                                 values[AIKO_PARAM_REFERENCE_PERIOD_MS - 1u]) == AIKO_RESULT_OK);
}

void jm_init(jm_t *jm, uint8_t node, const float values[JM_PARAMETER_COUNT], const int32_t counts[2]) {
    uint8_t i;
    memset(jm, 0, sizeof *jm);
    jm->node = node;
    jm->state = AIKO_STATE_DISABLED;
    for (i = 0u; i < JM_PARAMETER_COUNT; i++) jm->parameter[i] = jm_defaults[i];
    if (values != 0) {
        uint8_t pair_ok = (uint8_t)(stored_value_ok(AIKO_PARAM_WATCHDOG_PERIODS, values) &&
                                    stored_value_ok(AIKO_PARAM_REFERENCE_PERIOD_MS, values));
        for (i = 1u; i <= JM_PARAMETER_COUNT; i++) {
            uint8_t pair = (uint8_t)(i == AIKO_PARAM_WATCHDOG_PERIODS || i == AIKO_PARAM_REFERENCE_PERIOD_MS);
            if (pair ? pair_ok : stored_value_ok(i, values)) jm->parameter[i - 1u] = values[i - 1u];
        }
    }
    for (i = 1u; i <= JM_PARAMETER_COUNT; i++) derive(jm, i);
    for (i = 0u; i < 2u; i++) {
        jm->axis[i].previous_counts = counts[i];
        jm->axis[i].reference_q8 = counts[i] * 256;
    }
}

static void reject(jm_t *jm, uint8_t reason) { jm->rejected[reason]++; }

static void reply_parameter(const jm_t *jm, uint8_t index, uint8_t result, float value) {
    aiko_parameter_reply_t reply;
    jm_frame_t out;
    reply.index = index;
    reply.result = result;
    reply.value = value;
    out.id = (uint16_t)(AIKO_ID_PARAMETER_REPLY_BASE + jm->node);
    out.flags = 0u;
    out.dlc = (uint8_t)aiko_encode_parameter_reply(&reply, out.data);
    jm_send(&out);
}

static void on_parameter(jm_t *jm, const jm_frame_t *frame) {
    aiko_parameter_request_t request;
    int8_t rc = aiko_decode_parameter_request(frame->data, frame->dlc, &request);
    uint8_t result;
    if (rc == AIKO_ERR_DLC) {
        reject(jm, JM_REJECT_WRONG_DLC);
        return;
    }
    if (rc == AIKO_ERR_RANGE) { /* a Value outside the DBC's range (NaN, infinite): the frame is out of range */
        reject(jm, JM_REJECT_OUT_OF_RANGE);
        return;
    }
    if (rc != AIKO_OK) { /* bits the DBC does not define */
        reject(jm, JM_REJECT_RESERVED_BITS);
        return;
    }
    if (request.index < 1u || request.index > JM_PARAMETER_COUNT) {
        reply_parameter(jm, request.index, AIKO_RESULT_UNKNOWN_INDEX, 0.0f);
        return;
    }
    if (request.write) {
        result = aiko_parameter_write_result(jm->state, request.index, request.value,
                                             jm->parameter[AIKO_PARAM_WATCHDOG_PERIODS - 1u],
                                             jm->parameter[AIKO_PARAM_REFERENCE_PERIOD_MS - 1u]);
        if (result == AIKO_RESULT_LOCKED) reject(jm, JM_REJECT_PARAMETER_WHILE_ENABLED);
        if (result == AIKO_RESULT_OUT_OF_RANGE) reject(jm, JM_REJECT_OUT_OF_RANGE);
        if (result == AIKO_RESULT_OK) {
            jm->parameter[request.index - 1u] = request.value;
            derive(jm, request.index);
            jm->parameter_writes_accepted++;
        }
        reply_parameter(jm, request.index, result, jm->parameter[request.index - 1u]);
        return;
    }
    reply_parameter(jm, request.index, AIKO_RESULT_OK, jm->parameter[request.index - 1u]);
}

static void on_reference(jm_t *jm, const jm_frame_t *frame) {
    aiko_reference_t ref;
    int8_t rc = aiko_decode_reference(frame->data, frame->dlc, &ref);
    uint8_t delta, axis;
    int16_t angle[2];
    if (rc == AIKO_ERR_DLC) {
        reject(jm, JM_REJECT_WRONG_DLC);
        return;
    }
    if (rc != AIKO_OK) {
        reject(jm, JM_REJECT_OUT_OF_RANGE);
        return;
    }
    if (jm->state != AIKO_STATE_ENABLED) { /* not bad traffic; the sequence restarts at the next Enable */
        jm->ignored_while_disabled++;
        return;
    }
    if (jm->sequence_valid) {
        delta = (uint8_t)(ref.sequence - jm->last_sequence);
        if (delta == 0u) {
            reject(jm, JM_REJECT_DUPLICATE_SEQUENCE);
            return;
        }
        if (delta >= 128u) {
            reject(jm, JM_REJECT_STALE_SEQUENCE);
            return;
        }
        if (!aiko_sequence_is_newer(ref.sequence, jm->last_sequence)) {
            reject(jm, JM_REJECT_SEQUENCE_JUMP); /* `last` stays: the real sender's next frame still fits */
            return;
        }
    }
    jm->sequence_valid = 1u;
    jm->last_sequence = ref.sequence;
    angle[0] = ref.angle_h_cdeg;
    angle[1] = ref.angle_v_cdeg;
    for (axis = 0u; axis < 2u; axis++) {
        jm_axis_t *a = &jm->axis[axis];
        a->reference_q8 = clamp32(jm_cdeg_to_q8(angle[axis]), -a->limit_q8, a->limit_q8);
    }
    jm->axis[0].reference_rate_q16 = qdeg_s_to_q16(ref.rate_h_qdeg_s);
    jm->axis[1].reference_rate_q16 = qdeg_s_to_q16(ref.rate_v_qdeg_s);
    for (axis = 0u; axis < 2u; axis++) { /* the back-EMF feed-forward, once per reference */
        jm->axis[axis].feedforward_q4 = mul_q16(jm->axis[axis].reference_rate_q16, JM_BACK_EMF_Q12, INT32_MAX);
    }
    jm->last_valid_tick = jm->tick;
    jm->accepted_references++;
}

static void apply_command(jm_t *jm, uint8_t command, const int32_t counts[2]) {
    uint8_t axis;
    switch (command) {
        case AIKO_CMD_CLEAR_FAULTS:
            jm->estop = jm->fault = jm->watchdog = 0u;
            if (jm->state == AIKO_STATE_ESTOP || jm->state == AIKO_STATE_FAULT || jm->state == AIKO_STATE_WATCHDOG) {
                jm->state = AIKO_STATE_DISABLED;
            }
            break;
        case AIKO_CMD_DISABLE:
            if (jm->state == AIKO_STATE_ENABLED) jm->state = AIKO_STATE_DISABLED;
            break;
        case AIKO_CMD_ENABLE:
            if (jm->estop || jm->fault) return; /* needs ClearFaults first */
            jm->watchdog = 0u;
            jm->state = AIKO_STATE_ENABLED;
            for (axis = 0u; axis < 2u; axis++) { /* hold where it is: enabling never jumps */
                jm_axis_t *a = &jm->axis[axis];
                a->reference_q8 = counts[axis] * 256;
                a->previous_counts = counts[axis];
                a->reference_rate_q16 = 0;
                a->feedforward_q4 = 0;
                a->rate_q16 = 0;
            }
            jm->last_valid_tick = jm->tick;
            jm->sequence_valid = 0u;
            break;
        default:
            break;
    }
}

static void on_command(jm_t *jm, const jm_frame_t *frame, const int32_t counts[2]) {
    aiko_command_t command;
    int8_t rc = aiko_decode_command(frame->data, frame->dlc, &command);
    if (rc == AIKO_ERR_DLC) {
        reject(jm, JM_REJECT_WRONG_DLC);
        return;
    }
    if (rc != AIKO_OK) {
        reject(jm, JM_REJECT_OUT_OF_RANGE);
        return;
    }
    if (command.target_node != 0u && command.target_node != jm->node) return; /* another module's */
    if (command.command < AIKO_CMD_ENABLE || command.command > AIKO_CMD_CLEAR_FAULTS) {
        reject(jm, JM_REJECT_UNKNOWN_COMMAND);
        return;
    }
    apply_command(jm, command.command, counts);
}

void jm_emergency_stop(jm_t *jm) {
    jm->estop = 1u;
    jm->state = AIKO_STATE_ESTOP;
    jm->axis[0].duty = jm->axis[1].duty = 0;
}

static void on_estop(jm_t *jm, const jm_frame_t *frame) {
    int8_t rc = aiko_decode_emergency_stop(frame->data, frame->dlc);
    if (rc == AIKO_ERR_DLC) {
        reject(jm, JM_REJECT_WRONG_DLC);
    } else if (rc == AIKO_ERR_KEY) {
        reject(jm, JM_REJECT_BAD_ESTOP_KEY);
    } else {
        jm_emergency_stop(jm);
    }
}

static uint8_t is_protocol_id(uint16_t id) {
    uint16_t node_part = (uint16_t)(id & 0x7Fu);
    uint16_t base = (uint16_t)(id - node_part);
    if (id == AIKO_ID_EMERGENCY_STOP || id == AIKO_ID_COMMAND) return 1u;
    if (node_part < AIKO_NODE_MIN || node_part > AIKO_NODE_MAX) return 0u;
    return (uint8_t)(base == AIKO_ID_REFERENCE_BASE || base == AIKO_ID_FEEDBACK_BASE || base == AIKO_ID_RATES_BASE ||
                     base == AIKO_ID_PARAMETER_REPLY_BASE || base == AIKO_ID_PARAMETER_REQUEST_BASE ||
                     base == AIKO_ID_HEARTBEAT_BASE);
}

void jm_on_frame(jm_t *jm, const jm_frame_t *frame, const int32_t counts[2]) {
    uint16_t id = frame->id;
    if ((frame->flags & (JM_FRAME_EXTENDED | JM_FRAME_REMOTE)) != 0u || !is_protocol_id(id)) {
        jm->unknown_frames++; /* not of this protocol (the CAN controller's filters let few of them through) */
        return;
    }
    if (id == AIKO_ID_EMERGENCY_STOP) {
        on_estop(jm, frame);
    } else if (id == AIKO_ID_COMMAND) {
        on_command(jm, frame, counts);
    } else if (id == AIKO_ID_REFERENCE_BASE + jm->node) {
        on_reference(jm, frame);
    } else if (id == AIKO_ID_PARAMETER_REQUEST_BASE + jm->node) {
        on_parameter(jm, frame);
    } /* other modules' frames and module-to-PC kinds: not ours */
}

/* ------------------------------------------------------------------ the tick */
static int32_t axis_demand_q4(jm_axis_t *a, int32_t counts) {
    int32_t limit = a->limit_q8;
    int32_t reference = clamp32(a->reference_q8, -limit, limit);
    int32_t rate = a->reference_rate_q16;
    int32_t feedforward = a->feedforward_q4;
    int32_t position = counts * 256;
    int32_t raw, error, whole, p_term, d_term;
    if ((reference >= limit && rate > 0) || (reference <= -limit && rate < 0)) {
        rate = 0; /* at a limit, a feed-forward pointing outwards would hold the joint beyond it */
        feedforward = 0;
    }
    /* rate estimate: the encoder's difference (1/65536 count per tick) through the first-order filter */
    raw = clamp32(counts - a->previous_counts, -JM_RAW_STEP_MAX, JM_RAW_STEP_MAX) * 65536L;
    a->rate_q16 += mul_q16(raw - a->rate_q16, JM_RATE_ALPHA_Q16, INT32_MAX);
    a->previous_counts = counts;

    /* P: (error in 1/256 count) x (Q12 gain) >> 16 = 1/16 PWM count, as whole counts and the rest, so that no
     * product leaves int32 for any gain in the writable range: e = 256 whole + rest, 0 <= rest < 256 */
    error = reference - position;
    whole = error >> 8;
    if (whole > a->error_max_counts) whole = a->error_max_counts;
    if (whole < -a->error_max_counts) whole = -a->error_max_counts;
    p_term = rshift_round(whole * a->kp_q12 + rshift_round((error & 0xFF) * a->kp_q12, 8), 8);
    /* D: (rate difference in 1/65536 count per tick) x (Q12 gain) >> 16 */
    d_term = mul_q16(rate - a->rate_q16, a->kd_q12, a->rate_hi_max);
    return p_term + d_term + feedforward;
}

static void send_feedback(const jm_t *jm, const int32_t counts[2]) {
    aiko_feedback_t fb;
    aiko_rates_t rates;
    jm_frame_t out;
    uint16_t rejected = 0u;
    uint8_t i;
    fb.angle_h_cdeg = jm_counts_to_cdeg(counts[0]);
    fb.angle_v_cdeg = jm_counts_to_cdeg(counts[1]);
#if JM_PWM_TOP != 800
#error "the effort in percent is the duty >> 3: 800 PWM counts = 100 %"
#endif
    fb.effort_h_pct = (int8_t)rshift_round(jm->axis[0].duty, 3);
    fb.effort_v_pct = (int8_t)rshift_round(jm->axis[1].duty, 3);
    fb.status = (uint8_t)((jm->state == AIKO_STATE_ENABLED ? AIKO_STATUS_ENABLED : 0u) |
                          ((jm->fault || jm->estop) ? AIKO_STATUS_FAULT : 0u) |
                          (jm->watchdog ? AIKO_STATUS_WATCHDOG : 0u) | (jm->at_limit ? AIKO_STATUS_AT_LIMIT : 0u) |
                          (jm->saturated ? AIKO_STATUS_SATURATED : 0u) | (jm->estop ? AIKO_STATUS_ESTOP : 0u));
    fb.ref_sequence = jm->sequence_valid ? jm->last_sequence : 0u;
    out.flags = 0u;
    out.id = (uint16_t)(AIKO_ID_FEEDBACK_BASE + jm->node);
    out.dlc = (uint8_t)aiko_encode_feedback(&fb, out.data);
    jm_send(&out);
    for (i = 0u; i < JM_REJECT_COUNT; i++) rejected = (uint16_t)(rejected + (uint16_t)jm->rejected[i]);
    for (i = 0u; i < 2u; i++) {
        int32_t r = rshift_round(jm->axis[i].rate_q16 * 45, 12); /* 1/65536 count per ms -> 0.05 deg/s: x 45/4096 */
        r = clamp32(r, -32767, 32767);
        if (i == 0u) rates.rate_h_20mdeg_s = (int16_t)r;
        else rates.rate_v_20mdeg_s = (int16_t)r;
    }
    rates.rejected_frames = rejected;
    rates.accepted_references = (uint16_t)jm->accepted_references;
    out.id = (uint16_t)(AIKO_ID_RATES_BASE + jm->node);
    out.dlc = (uint8_t)aiko_encode_rates(&rates, out.data);
    jm_send(&out);
}

static void send_heartbeat(const jm_t *jm) {
    aiko_heartbeat_t hb;
    jm_frame_t out;
    uint32_t uptime = jm->tick / JM_TICK_HZ;
    hb.state = jm->state;
    hb.firmware_version = JM_FIRMWARE_VERSION;
    hb.uptime_s = (uint16_t)(uptime > 0xFFFFu ? 0xFFFFu : uptime);
    out.flags = 0u;
    out.id = (uint16_t)(AIKO_ID_HEARTBEAT_BASE + jm->node);
    out.dlc = (uint8_t)aiko_encode_heartbeat(&hb, out.data);
    jm_send(&out);
}

uint8_t jm_tick(jm_t *jm, const int32_t counts[2], uint8_t current_limited) {
    uint8_t axis, enabled;
    /* the last tick's SATURATED: its demand beyond the supply, or the H-bridge limiting since, while enabled */
    jm->saturated = jm->enabled_this_tick ? (uint8_t)((jm->saturated_demand | current_limited) & 3u) : 0u;
    enabled = (uint8_t)(jm->state == AIKO_STATE_ENABLED);
    if (enabled && jm->tick - jm->last_valid_tick > jm->watchdog_limit_ticks) {
        jm->state = AIKO_STATE_WATCHDOG; /* hold the last reference until now, then brake */
        jm->watchdog = 1u;
        jm->watchdog_trip_tick = jm->tick;
        jm->watchdog_trips++;
        enabled = 0u;
    }
    jm->at_limit = 0u;
    jm->saturated_demand = 0u;
    for (axis = 0u; axis < 2u; axis++) {
        jm_axis_t *a = &jm->axis[axis];
        int32_t position = counts[axis] * 256;
        int32_t demand = axis_demand_q4(a, counts[axis]);
        if (demand > JM_DEMAND_SUPPLY_Q4 || demand < -JM_DEMAND_SUPPLY_Q4) {
            jm->saturated_demand |= (uint8_t)(1u << axis);
        }
        if ((position < 0 ? -position : position) >= a->limit_q8 - JM_AT_LIMIT_MARGIN_Q8) {
            jm->at_limit |= (uint8_t)(1u << axis);
        }
        a->duty = enabled ? (int16_t)clamp32(rshift_round(demand, 4), -JM_PWM_TOP, JM_PWM_TOP) : 0;
    }
    jm->enabled_this_tick = enabled;
    if (jm->feedback_divisor != 0u && jm->feedback_phase == 0u) send_feedback(jm, counts);
    if (jm->heartbeat_phase == 0u) send_heartbeat(jm);
    jm->tick++;
    if (++jm->feedback_phase >= jm->feedback_divisor) jm->feedback_phase = 0u;
    if (++jm->heartbeat_phase >= JM_HEARTBEAT_DIVISOR) jm->heartbeat_phase = 0u;
    return enabled;
}
