import { DEFAULT_MAX_MESSAGE_BYTES } from '@meshp/core/agent';
import type { ChannelOptions } from '@grpc/grpc-js';

/** Both ends: message size limits, and keepalives so a dead peer is noticed within a minute. */
export function channelOptions(maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): ChannelOptions {
  return {
    'grpc.max_receive_message_length': maxMessageBytes,
    'grpc.max_send_message_length': maxMessageBytes,
    'grpc.keepalive_time_ms': 20_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_time_between_pings_ms': 10_000,
    'grpc.http2.max_pings_without_data': 0,
    // Reconnects are the agent's own (jittered); keep the channel's own short.
    'grpc.initial_reconnect_backoff_ms': 200,
    'grpc.max_reconnect_backoff_ms': 5_000,
  };
}

/** The server receives up to twice the limit itself so that it can refuse, code and log what is over it. */
export function serverOptions(maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): ChannelOptions {
  return {
    ...channelOptions(maxMessageBytes),
    'grpc.max_receive_message_length': maxMessageBytes * 2,
    'grpc.http2.min_ping_interval_without_data_ms': 5_000,
    // Channelz (grpc-js's introspection, served by nothing here) tracks every connection and call:
    // about 1 KB of heap per connection, kept for each agent's idle stream (issue 15).
    'grpc.enable_channelz': 0,
  };
}
