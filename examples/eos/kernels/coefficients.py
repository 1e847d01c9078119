"""The polynomial's coefficients, shared by every library's kernel (plain floats)."""

#: rho = R0 + T (R1 + T (R2 + T R3)) + S (S1 + T (S2 + T S3)) + S^1.5 (H1 + T H2)
#:       + Q S^2 + p (P1 + T P2 + p P3)
R0, R1, R2, R3 = 999.842594, 6.793952e-2, -9.095290e-3, 1.001685e-4
S1, S2, S3 = 8.24493e-1, -4.0899e-3, 7.6438e-5
H1, H2 = -5.72466e-3, 1.0227e-4
Q = 4.8314e-4
P1, P2, P3 = 4.9e-2, -3.0e-4, -1.0e-6
