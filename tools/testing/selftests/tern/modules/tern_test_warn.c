// SPDX-License-Identifier: GPL-2.0
/*
 * A module that WARNs when loaded. It exists so the test lane can prove
 * that a kernel warning fails a run even when the test command succeeds;
 * nothing else loads it.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init tern_test_warn_init(void)
{
	WARN(1, "tern_test_warn: deliberate warning, the lane must fail this run\n");
	return 0;
}

static void __exit tern_test_warn_exit(void)
{
}

module_init(tern_test_warn_init);
module_exit(tern_test_warn_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern test lane: a module that WARNs on load");
