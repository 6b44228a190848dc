"""The shared comparison core: what every exercise's checks are built on.

It runs on both sides: in the student's kernel for the visible checks, in the grader for
every check.  ``engine`` compares a student's layer with torch case by case, ``structure`` the
contract (parameters, buffers, ``state_dict``), ``numerics`` says how close is close enough,
``messages`` phrases a failure, ``forbidden`` catches torch's own normalization, ``inputs`` and
``seeding`` draw the inputs, ``side`` and ``wire`` reach the student's objects as plain data,
``questions`` grades answers, ``integrity`` notices tampering, and ``formulas``,
``batch_norm_hints`` and ``norm_hints`` hold the misconceptions several exercises share.
"""
