// SPDX-License-Identifier: GPL-2.0
/*
 * hrtimer_setup() (6.13), which sets the callback with the clock and
 * mode; hrtimer_init() is gone in 6.15.
 */
#include <linux/hrtimer.h>

void tern_probe(struct hrtimer *timer,
		enum hrtimer_restart (*fn)(struct hrtimer *));
void tern_probe(struct hrtimer *timer,
		enum hrtimer_restart (*fn)(struct hrtimer *))
{
	hrtimer_setup(timer, fn, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
}
