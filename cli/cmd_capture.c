/* SPDX-License-Identifier: MIT */
#include "cli.h"
int tb_cmd_capture(int argc, char **argv)
{
    (void)argc; (void)argv;
    tb_log_error("capture: not built yet");
    return TB_EXIT_FAIL;
}
