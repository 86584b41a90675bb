"""Indices into the compiled simulator's parameter vector (see `SnakeModel.params_array` / `PARAM_NAMES`) and its
status codes, shared by :mod:`sim.snake3d.fast` and :mod:`sim.snake3d.contact_kernels`."""

# indices into the parameter vector (see SnakeModel.params_array / PARAM_NAMES)
P_L, P_LSC, P_LGS, P_M, P_TH1, P_TH3, P_GX, P_GY, P_GZ, P_MUX, P_MUY, P_MUV, P_DT, P_PAPER = range(14)
P_RN, P_RT, P_RV, P_TOL, P_MAXIT, P_RETRIES, P_VTOL, P_INNER, P_MUO, P_RTOL, P_HALVINGS, P_CONTRACTING = range(14, 26)
P_PDIMPLICIT = 26
INNER_TOLERANCE_FACTOR = 1e-2

STATUS_OK = 0
STATUS_NOT_CONVERGED = 1
STATUS_NOT_FINITE = 2
