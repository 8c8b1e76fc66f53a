/*
 * figures.h - the tools' summary figures of measured samples: quantiles of
 * one run's latencies, medians over repetitions or rounds (ramster-bench,
 * ramster-netbench, ramster-drill). Every call sorts the array it is given,
 * in place; the nearest-rank rule is the one every report has used, so a
 * figure means the same in each tool.
 */
#ifndef RAMSTER_TOOLS_FIGURES_H
#define RAMSTER_TOOLS_FIGURES_H

#include <stddef.h>

/*
 * The q-quantile (0..1) of v[0..n): the value at rank round(q * (n - 1)) once
 * sorted. Sorts v. @return it, 0 when n is 0.
 */
double figures_quantile(double *v, size_t n, double q);

/* The median of v[0..n) (figures_quantile at 0.5). Sorts v. */
double figures_median(double *v, size_t n);

#endif /* RAMSTER_TOOLS_FIGURES_H */
