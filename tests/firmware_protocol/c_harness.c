/* Reads "<Message> <payload-hex> <raw fields...>" lines; prints "<encoded-hex> <decode-rc> <decoded fields...>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aiko_joint.h"

static int parse_hex(const char *hex, uint8_t *out) {
    int n = 0;
    while (hex[0] && hex[1] && n < 8) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
        hex += 2;
    }
    return n;
}

static void print_hex(const uint8_t *d, int n) {
    for (int i = 0; i < n; i++) printf("%02x", d[i]);
}

int main(void) {
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        char name[64], hex[32];
        int used = 0;
        if (sscanf(line, "%63s %31s%n", name, hex, &used) < 2) continue;
        const char *rest = line + used;
        uint8_t expected[8] = {0}, out[8] = {0};
        uint8_t dlc = (uint8_t)parse_hex(hex, expected);
        int8_t n = 0, rc = 0;
        if (!strcmp(name, "EmergencyStop")) {
            n = aiko_encode_emergency_stop(out);
            rc = aiko_decode_emergency_stop(expected, dlc);
            print_hex(out, n);
            printf(" %d\n", rc);
        } else if (!strcmp(name, "Command")) {
            aiko_command_t m, d;
            unsigned a, b;
            sscanf(rest, "%u %u", &a, &b);
            m.command = (uint8_t)a;
            m.target_node = (uint8_t)b;
            n = aiko_encode_command(&m, out);
            rc = aiko_decode_command(expected, dlc, &d);
            print_hex(out, n);
            printf(" %d %u %u\n", rc, d.command, d.target_node);
        } else if (!strcmp(name, "JointReference")) {
            aiko_reference_t m, d;
            int a, b, c, e;
            unsigned s;
            sscanf(rest, "%d %d %d %d %u", &a, &b, &c, &e, &s);
            m.angle_h_cdeg = (int16_t)a;
            m.angle_v_cdeg = (int16_t)b;
            m.rate_h_qdeg_s = (int16_t)c;
            m.rate_v_qdeg_s = (int16_t)e;
            m.sequence = (uint8_t)s;
            n = aiko_encode_reference(&m, out);
            rc = aiko_decode_reference(expected, dlc, &d);
            print_hex(out, n);
            printf(" %d %d %d %d %d %u\n", rc, d.angle_h_cdeg, d.angle_v_cdeg, d.rate_h_qdeg_s, d.rate_v_qdeg_s,
                   d.sequence);
        } else if (!strcmp(name, "JointFeedback")) {
            aiko_feedback_t m, d;
            int a, b, c, e;
            unsigned st, s;
            sscanf(rest, "%d %d %d %d %u %u", &a, &b, &c, &e, &st, &s);
            m.angle_h_cdeg = (int16_t)a;
            m.angle_v_cdeg = (int16_t)b;
            m.effort_h_pct = (int8_t)c;
            m.effort_v_pct = (int8_t)e;
            m.status = (uint8_t)st;
            m.ref_sequence = (uint8_t)s;
            n = aiko_encode_feedback(&m, out);
            rc = aiko_decode_feedback(expected, dlc, &d);
            print_hex(out, n);
            printf(" %d %d %d %d %d %u %u\n", rc, d.angle_h_cdeg, d.angle_v_cdeg, d.effort_h_pct, d.effort_v_pct,
                   d.status, d.ref_sequence);
        } else if (!strcmp(name, "JointRates")) {
            aiko_rates_t m, d;
            int a, b;
            unsigned c, e;
            sscanf(rest, "%d %d %u %u", &a, &b, &c, &e);
            m.rate_h_20mdeg_s = (int16_t)a;
            m.rate_v_20mdeg_s = (int16_t)b;
            m.rejected_frames = (uint16_t)c;
            m.accepted_references = (uint16_t)e;
            n = aiko_encode_rates(&m, out);
            rc = aiko_decode_rates(expected, dlc, &d);
            print_hex(out, n);
            printf(" %d %d %d %u %u\n", rc, d.rate_h_20mdeg_s, d.rate_v_20mdeg_s, d.rejected_frames,
                   d.accepted_references);
        } else if (!strcmp(name, "ParameterRequest") || !strcmp(name, "ParameterReply")) {
            unsigned a, b;
            double v;
            sscanf(rest, "%u %u %lf", &a, &b, &v);
            if (name[9] == 'R' && name[10] == 'e' && name[11] == 'q') {
                aiko_parameter_request_t m = {(uint8_t)a, (uint8_t)b, (float)v}, d;
                n = aiko_encode_parameter_request(&m, out);
                rc = aiko_decode_parameter_request(expected, dlc, &d);
                print_hex(out, n);
                printf(" %d %u %u %.17g\n", rc, d.index, d.write, (double)d.value);
            } else {
                aiko_parameter_reply_t m = {(uint8_t)a, (uint8_t)b, (float)v}, d;
                n = aiko_encode_parameter_reply(&m, out);
                rc = aiko_decode_parameter_reply(expected, dlc, &d);
                print_hex(out, n);
                printf(" %d %u %u %.17g\n", rc, d.index, d.result, (double)d.value);
            }
        } else if (!strcmp(name, "Heartbeat")) {
            aiko_heartbeat_t m, d;
            unsigned a, b, c;
            sscanf(rest, "%u %u %u", &a, &b, &c);
            m.state = (uint8_t)a;
            m.firmware_version = (uint8_t)b;
            m.uptime_s = (uint16_t)c;
            n = aiko_encode_heartbeat(&m, out);
            rc = aiko_decode_heartbeat(expected, dlc, &d);
            print_hex(out, n);
            printf(" %d %u %u %u\n", rc, d.state, d.firmware_version, d.uptime_s);
        } else if (!strcmp(name, "Sequence")) { /* Sequence <seq> <last> -> 1 if accepted */
            unsigned seq, last;
            sscanf(hex, "%u", &seq);
            sscanf(rest, "%u", &last);
            printf("%u\n", aiko_sequence_is_newer((uint8_t)seq, (uint8_t)last));
        } else if (!strcmp(name, "ParameterWrite")) { /* ParameterWrite <state> <index> <value> <wd> <ref_ms> */
            unsigned state, index;
            float value, wd, ref;
            sscanf(hex, "%u", &state);
            sscanf(rest, "%u %f %f %f", &index, &value, &wd, &ref);
            printf("%u\n", aiko_parameter_write_result((uint8_t)state, (uint8_t)index, value, wd, ref));
        } else {
            printf("unknown %s\n", name);
        }
    }
    return 0;
}
