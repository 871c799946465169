// SPDX-License-Identifier: GPL-2.0
/* <crypto/utils.h> (6.5); before, crypto_memneq() is in <crypto/algapi.h> */
#include <crypto/utils.h>

int tern_probe(const void *a, const void *b, size_t size);
int tern_probe(const void *a, const void *b, size_t size)
{
	return crypto_memneq(a, b, size);
}
