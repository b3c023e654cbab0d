"""`--metric NAME`: bisection on a number. sequential (pure: sequential evidence),
comparator (samples in, a call out), segments (several changes in one range),
confirmation (the answer's pair called again), measured (the metric bisection).

May import: core."""
