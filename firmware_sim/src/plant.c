/*
 * plant.c - see plant.h. The expressions and their order are those of firmware_protocol/emulator/fast.py.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 */
#include "plant.h"

#include <math.h>

static double clip(double x, double low, double high) { return fmin(fmax(x, low), high); }

void plant_substep(const plant_params_t *p, plant_state_t *s, const double duty[2]) {
    double dt = p->substep_s;
    int a;
    s->limited = 0;
    for (a = 0; a < 2; a++) {
        /* drive_substep */
        double gear_rate = s->gear_rate[a];
        double gap = s->gear_angle[a] - s->joint_angle[a];
        double sign = gap > 0.0 ? 1.0 : (gap < 0.0 ? -1.0 : 0.0);
        double penetration = sign * fmax(fabs(gap) - p->half_free_play_rad, 0.0);
        double coupling = p->contact_stiffness * penetration +
                          (penetration != 0.0 ? p->contact_damping * (gear_rate - s->joint_rate[a]) : 0.0);
        double voltage = duty[a] * p->supply_v;
        double current = (voltage - p->back_emf_v_s * gear_rate) / p->resistance_ohm;
        double drive, accel, rate, angle;
        if (fabs(current) > p->current_limit_a) s->limited |= (uint8_t)(1u << a);
        drive = p->torque_per_amp * clip(current, -p->current_limit_a, p->current_limit_a);
        accel = (drive - coupling - p->gear_viscous * gear_rate) / p->reflected_inertia;
        gear_rate += dt * accel;
        s->gear_rate[a] = gear_rate;
        s->gear_angle[a] += dt * gear_rate;
        /* inertia_advance, with the coupling torque on the joint */
        rate = s->joint_rate[a] + dt * (coupling - p->damping * s->joint_rate[a]) / p->inertia;
        angle = s->joint_angle[a] + dt * rate;
        if (fabs(angle) > p->limit_rad[a]) {
            angle = clip(angle, -p->limit_rad[a], p->limit_rad[a]);
            rate = 0.0;
        }
        s->joint_angle[a] = angle;
        s->joint_rate[a] = rate;
    }
}

double plant_measured_angle(const plant_params_t *p, const plant_state_t *s, int axis) {
    return p->sensor_joint ? s->joint_angle[axis] : s->gear_angle[axis];
}

double plant_measured_rate(const plant_params_t *p, const plant_state_t *s, int axis) {
    return p->sensor_joint ? s->joint_rate[axis] : s->gear_rate[axis];
}
