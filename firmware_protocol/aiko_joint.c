/* aiko_joint.c - pack/unpack of the Aiko joint protocol; byte-wise so that it stays small on the ATmega128. */
#include "aiko_joint.h"

#include <string.h>

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)((uint16_t)p[0] | ((uint16_t)p[1] << 8)); }

static void put_f32(uint8_t *p, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    p[0] = (uint8_t)(bits & 0xFFu);
    p[1] = (uint8_t)((bits >> 8) & 0xFFu);
    p[2] = (uint8_t)((bits >> 16) & 0xFFu);
    p[3] = (uint8_t)(bits >> 24);
}

static float get_f32(const uint8_t *p) {
    uint32_t bits = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static int16_t sign_extend12(uint16_t raw) { return (int16_t)((raw & 0x800u) ? (raw | 0xF000u) : raw); }

static uint8_t angle_ok(int16_t cdeg) { return (uint8_t)(cdeg >= -AIKO_ANGLE_CDEG_MAX && cdeg <= AIKO_ANGLE_CDEG_MAX); }

static uint8_t effort_ok(int8_t pct) { return (uint8_t)(pct >= -AIKO_EFFORT_PCT_MAX && pct <= AIKO_EFFORT_PCT_MAX); }

int8_t aiko_encode_emergency_stop(uint8_t data[8]) {
    data[0] = AIKO_ESTOP_KEY;
    return (int8_t)AIKO_DLC_EMERGENCY_STOP;
}

int8_t aiko_decode_emergency_stop(const uint8_t *data, uint8_t dlc) {
    if (dlc != AIKO_DLC_EMERGENCY_STOP) return AIKO_ERR_DLC;
    return data[0] == AIKO_ESTOP_KEY ? AIKO_OK : AIKO_ERR_KEY;
}

int8_t aiko_encode_command(const aiko_command_t *msg, uint8_t data[8]) {
    if (msg->target_node > 127u) return AIKO_ERR_RANGE;
    data[0] = msg->command;
    data[1] = msg->target_node;
    return (int8_t)AIKO_DLC_COMMAND;
}

int8_t aiko_decode_command(const uint8_t *data, uint8_t dlc, aiko_command_t *msg) {
    if (dlc != AIKO_DLC_COMMAND) return AIKO_ERR_DLC;
    msg->command = data[0];
    msg->target_node = data[1];
    return msg->target_node > 127u ? AIKO_ERR_RANGE : AIKO_OK;
}

int8_t aiko_encode_reference(const aiko_reference_t *msg, uint8_t data[8]) {
    if (!angle_ok(msg->angle_h_cdeg) || !angle_ok(msg->angle_v_cdeg)) return AIKO_ERR_RANGE;
    if (msg->rate_h_qdeg_s < -2048 || msg->rate_h_qdeg_s > 2047) return AIKO_ERR_RANGE;
    if (msg->rate_v_qdeg_s < -2048 || msg->rate_v_qdeg_s > 2047) return AIKO_ERR_RANGE;
    uint16_t rh = (uint16_t)msg->rate_h_qdeg_s & 0x0FFFu;
    uint16_t rv = (uint16_t)msg->rate_v_qdeg_s & 0x0FFFu;
    put_u16(&data[0], (uint16_t)msg->angle_h_cdeg);
    put_u16(&data[2], (uint16_t)msg->angle_v_cdeg);
    data[4] = (uint8_t)(rh & 0xFFu);                       /* RateH bits 32..39 */
    data[5] = (uint8_t)((rh >> 8) | ((rv & 0x0Fu) << 4)); /* RateH 40..43, RateV 44..47 */
    data[6] = (uint8_t)(rv >> 4);                          /* RateV 48..55 */
    data[7] = msg->sequence;
    return (int8_t)AIKO_DLC_REFERENCE;
}

int8_t aiko_decode_reference(const uint8_t *data, uint8_t dlc, aiko_reference_t *msg) {
    if (dlc != AIKO_DLC_REFERENCE) return AIKO_ERR_DLC;
    msg->angle_h_cdeg = (int16_t)get_u16(&data[0]);
    msg->angle_v_cdeg = (int16_t)get_u16(&data[2]);
    msg->rate_h_qdeg_s = sign_extend12((uint16_t)(data[4] | ((uint16_t)(data[5] & 0x0Fu) << 8)));
    msg->rate_v_qdeg_s = sign_extend12((uint16_t)((data[5] >> 4) | ((uint16_t)data[6] << 4)));
    msg->sequence = data[7];
    if (!angle_ok(msg->angle_h_cdeg) || !angle_ok(msg->angle_v_cdeg)) return AIKO_ERR_RANGE;
    return AIKO_OK;
}

int8_t aiko_encode_feedback(const aiko_feedback_t *msg, uint8_t data[8]) {
    if (!angle_ok(msg->angle_h_cdeg) || !angle_ok(msg->angle_v_cdeg)) return AIKO_ERR_RANGE;
    if (!effort_ok(msg->effort_h_pct) || !effort_ok(msg->effort_v_pct)) return AIKO_ERR_RANGE;
    put_u16(&data[0], (uint16_t)msg->angle_h_cdeg);
    put_u16(&data[2], (uint16_t)msg->angle_v_cdeg);
    data[4] = (uint8_t)msg->effort_h_pct;
    data[5] = (uint8_t)msg->effort_v_pct;
    data[6] = (uint8_t)(msg->status & 0x3Fu);
    data[7] = msg->ref_sequence;
    return (int8_t)AIKO_DLC_FEEDBACK;
}

int8_t aiko_decode_feedback(const uint8_t *data, uint8_t dlc, aiko_feedback_t *msg) {
    if (dlc != AIKO_DLC_FEEDBACK) return AIKO_ERR_DLC;
    msg->angle_h_cdeg = (int16_t)get_u16(&data[0]);
    msg->angle_v_cdeg = (int16_t)get_u16(&data[2]);
    msg->effort_h_pct = (int8_t)data[4];
    msg->effort_v_pct = (int8_t)data[5];
    msg->status = (uint8_t)(data[6] & 0x3Fu);
    msg->ref_sequence = data[7];
    if (!angle_ok(msg->angle_h_cdeg) || !angle_ok(msg->angle_v_cdeg)) return AIKO_ERR_RANGE;
    if (!effort_ok(msg->effort_h_pct) || !effort_ok(msg->effort_v_pct)) return AIKO_ERR_RANGE;
    return AIKO_OK;
}

int8_t aiko_encode_rates(const aiko_rates_t *msg, uint8_t data[8]) {
    put_u16(&data[0], (uint16_t)msg->rate_h_20mdeg_s);
    put_u16(&data[2], (uint16_t)msg->rate_v_20mdeg_s);
    put_u16(&data[4], msg->rejected_frames);
    put_u16(&data[6], msg->accepted_references);
    return (int8_t)AIKO_DLC_RATES;
}

int8_t aiko_decode_rates(const uint8_t *data, uint8_t dlc, aiko_rates_t *msg) {
    if (dlc != AIKO_DLC_RATES) return AIKO_ERR_DLC;
    msg->rate_h_20mdeg_s = (int16_t)get_u16(&data[0]);
    msg->rate_v_20mdeg_s = (int16_t)get_u16(&data[2]);
    msg->rejected_frames = get_u16(&data[4]);
    msg->accepted_references = get_u16(&data[6]);
    return AIKO_OK;
}

int8_t aiko_encode_parameter_request(const aiko_parameter_request_t *msg, uint8_t data[8]) {
    if (msg->write > 1u) return AIKO_ERR_RANGE;
    data[0] = msg->index;
    data[1] = msg->write;
    data[2] = 0u;
    data[3] = 0u;
    put_f32(&data[4], msg->value);
    return (int8_t)AIKO_DLC_PARAMETER;
}

int8_t aiko_decode_parameter_request(const uint8_t *data, uint8_t dlc, aiko_parameter_request_t *msg) {
    uint32_t magnitude;
    if (dlc != AIKO_DLC_PARAMETER) return AIKO_ERR_DLC;
    msg->index = data[0];
    msg->write = (uint8_t)(data[1] & 0x01u);
    msg->value = get_f32(&data[4]);
    magnitude = ((uint32_t)data[4] | ((uint32_t)data[5] << 8) | ((uint32_t)data[6] << 16) | ((uint32_t)data[7] << 24)) &
                0x7FFFFFFFul;
    if (magnitude > AIKO_VALUE_MAGNITUDE_MAX_BITS) return AIKO_ERR_RANGE; /* NaN, infinite, beyond the DBC range */
    /* bits the DBC does not define (byte 1 bits 1..7, bytes 2..3) must be 0: a stray frame rarely passes */
    if ((data[1] & 0xFEu) != 0u || data[2] != 0u || data[3] != 0u) return AIKO_ERR_RESERVED;
    return AIKO_OK;
}

static uint8_t in_range(float v, float lo, float hi) { return (uint8_t)(v >= lo && v <= hi); } /* NaN: 0 */

uint8_t aiko_parameter_write_result(uint8_t state, uint8_t index, float value, float watchdog_periods,
                                    float reference_period_ms) {
    float lo, hi;
    switch (index) {
        case AIKO_PARAM_KP_H:
        case AIKO_PARAM_KP_V: lo = 1.0f; hi = 5000.0f; break;
        case AIKO_PARAM_KD_H:
        case AIKO_PARAM_KD_V: lo = 0.0f; hi = 500.0f; break;
        case AIKO_PARAM_LIMIT_H_DEG:
        case AIKO_PARAM_LIMIT_V_DEG: lo = 1.0f; hi = 180.0f; break;
        case AIKO_PARAM_WATCHDOG_PERIODS: lo = 1.0f; hi = 100.0f; break;
        case AIKO_PARAM_REFERENCE_PERIOD_MS: lo = 1.0f; hi = 1000.0f; break;
        case AIKO_PARAM_FEEDBACK_RATE_HZ: lo = 0.0f; hi = 1000.0f; break;
        case AIKO_PARAM_TORQUE_LIMIT_H_NM:
        case AIKO_PARAM_TORQUE_LIMIT_V_NM:
        case AIKO_PARAM_FREE_PLAY_DEG: return AIKO_RESULT_READ_ONLY;
        default: return AIKO_RESULT_UNKNOWN_INDEX;
    }
    if (state == AIKO_STATE_ENABLED) return AIKO_RESULT_LOCKED;
    if (!in_range(value, lo, hi)) return AIKO_RESULT_OUT_OF_RANGE;
    if (index == AIKO_PARAM_WATCHDOG_PERIODS || index == AIKO_PARAM_REFERENCE_PERIOD_MS) {
        float timeout_ms = (index == AIKO_PARAM_WATCHDOG_PERIODS ? value : watchdog_periods) *
                           (index == AIKO_PARAM_REFERENCE_PERIOD_MS ? value : reference_period_ms);
        if (!in_range(timeout_ms, (float)AIKO_WATCHDOG_TIMEOUT_MIN_MS, (float)AIKO_WATCHDOG_TIMEOUT_MAX_MS)) {
            return AIKO_RESULT_OUT_OF_RANGE;
        }
    }
    return AIKO_RESULT_OK;
}

int8_t aiko_encode_parameter_reply(const aiko_parameter_reply_t *msg, uint8_t data[8]) {
    data[0] = msg->index;
    data[1] = msg->result;
    data[2] = 0u;
    data[3] = 0u;
    put_f32(&data[4], msg->value);
    return (int8_t)AIKO_DLC_PARAMETER;
}

int8_t aiko_decode_parameter_reply(const uint8_t *data, uint8_t dlc, aiko_parameter_reply_t *msg) {
    if (dlc != AIKO_DLC_PARAMETER) return AIKO_ERR_DLC;
    msg->index = data[0];
    msg->result = data[1];
    msg->value = get_f32(&data[4]);
    return AIKO_OK;
}

int8_t aiko_encode_heartbeat(const aiko_heartbeat_t *msg, uint8_t data[8]) {
    data[0] = msg->state;
    data[1] = msg->firmware_version;
    put_u16(&data[2], msg->uptime_s);
    return (int8_t)AIKO_DLC_HEARTBEAT;
}

int8_t aiko_decode_heartbeat(const uint8_t *data, uint8_t dlc, aiko_heartbeat_t *msg) {
    if (dlc != AIKO_DLC_HEARTBEAT) return AIKO_ERR_DLC;
    msg->state = data[0];
    msg->firmware_version = data[1];
    msg->uptime_s = get_u16(&data[2]);
    return AIKO_OK;
}
