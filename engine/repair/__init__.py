"""A store checked and made whole from its commitlog: recovery, rebuild, verify."""
