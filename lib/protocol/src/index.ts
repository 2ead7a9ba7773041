// @meshp/protocol: the control protocol as generated from proto/meshp/v1/control.proto (every
// message with its codec, the Control and Admin services), and the admin API as a typed map.
// mirrors.ts holds no code: it fails `tsc -b` when core's hand-written wire and transport types
// and the generated ones part.
export * from './gen/meshp/v1/control.js';
export type { AdminApi, AdminMethod, AdminRequest, AdminResponse, AdminAnswer } from './admin-api.js';
// The writer the generated codecs use: the transport encodes a shared body once with it (issue 31).
export { BinaryWriter } from '@bufbuild/protobuf/wire';
