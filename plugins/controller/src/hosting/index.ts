export { ControllerHostingPlugin, CONTROLLER_DB, ADDRESS_FILE, type ControllerHostingOptions, type RunningController } from './plugin.js';
export { ADMIN_CREDENTIAL_FILE, parseAdminCredential, readAdminCredential, formatAdminCredential, type AdminCredential } from './credential.js';
export { ensureCertificate, certificateFingerprint, type ControllerTls } from './tls.js';
export { DEFAULT_NETWORK, adminHandler, nodeToWire, type AdminDeps } from './admin.js';
export { Metrics, serveMetrics, BUILD_VERSION } from './metrics.js';
export { createLogger, type Logger } from './log.js';
export { AuthStore } from './auth-store.js';
export { Enrolment } from './enrolment.js';
