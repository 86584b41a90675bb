/*
 * plant.h - the drives and joints of one module, integrated inside the harness (the "internal plant").
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 *
 * The same model, operation for operation, as the Python emulator's compiled drive sub-step and independent-inertia
 * plant (firmware_protocol/emulator/fast.py drive_substep, inertia_advance; their readable forms drive.py and
 * plant.py): a DC motor with its current limit, a gear, the joint's free play as a dead zone with a stiff contact,
 * and an inertia with damping and inelastic stops. The Python side uses it for the plant it would otherwise step
 * through the pipe every physics sub-step (IndependentInertiaPlant): the harness then runs whole periods alone.
 * tests/firmware_sim checks it against the Python model.
 */
#ifndef HARNESS_PLANT_H
#define HARNESS_PLANT_H

#include <stdint.h>

typedef struct {
    double substep_s, half_free_play_rad, contact_stiffness, contact_damping, supply_v, resistance_ohm;
    double back_emf_v_s, current_limit_a, torque_per_amp, gear_viscous, reflected_inertia;
    double inertia, damping, limit_rad[2];
    uint8_t sensor_joint; /* the encoder reads the joint (1) or the gear output (0) */
} plant_params_t;

typedef struct {
    double gear_angle[2], gear_rate[2], joint_angle[2], joint_rate[2];
    uint8_t limited; /* bits: the current limit was hit in the last sub-step */
} plant_state_t;

/* One physics sub-step of both axes with the armature voltage duty x supply (a braked axis has duty 0). */
void plant_substep(const plant_params_t *p, plant_state_t *s, const double duty[2]);

/* What the encoder and the potentiometer of an axis see now, and its rate. */
double plant_measured_angle(const plant_params_t *p, const plant_state_t *s, int axis);
double plant_measured_rate(const plant_params_t *p, const plant_state_t *s, int axis);

#endif
