# The original's physics/long_context tasks ship a judge.py; lis uses its own
# implementation of that judge (batch/score_judge.c). Its presence is what counts.
