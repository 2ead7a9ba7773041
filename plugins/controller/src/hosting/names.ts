/** The names a controller's state folder and its clients share, apart from anything that runs a controller. */

/** The network a command means when none is named. */
export const DEFAULT_NETWORK = 'default';
/** Written at start so the CLI finds the controller from `--state DIR` alone. */
export const ADDRESS_FILE = 'controller.address';
