/* SPDX-License-Identifier: MIT */
/* fuzz_tls.c — libFuzzer harness for the tls parser: both directions in random
 * splits, holes and a close (see pt_fuzz_drive in capture/proto/proto-test.h). */
#include <stddef.h>
#include <stdint.h>

#include "proto-test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_fuzz_drive(&tb_proto_tls, data, size);
    return 0;
}
