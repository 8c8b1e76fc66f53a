/*
 * figures.c - quantiles and medians for the tools' reports (figures.h).
 */
#include <stdlib.h>

#include "tools/figures.h"

static int figures_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double figures_quantile(double *v, size_t n, double q)
{
	size_t i;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), figures_cmp);
	i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

double figures_median(double *v, size_t n)
{
	return figures_quantile(v, n, 0.5);
}
