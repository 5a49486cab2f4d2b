/* SPDX-License-Identifier: MIT */
#include "cli.h"
int tb_cmd_events(int argc, char **argv)
{
    (void)argc; (void)argv;
    tb_log_error("events: not built yet");
    return TB_EXIT_FAIL;
}
