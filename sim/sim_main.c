/* SPDX-License-Identifier: MIT */
#include <stdio.h>
int main(void) { fprintf(stderr, "tbneck-sim: not built yet\n"); return 1; }
