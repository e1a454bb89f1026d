"""The RocketMQ setting each mqstore configuration key stands for, where there is one.

Keys are ``section.key`` as in the TOML file. Every name here is checked (``tests/docs``) to appear in
the RocketMQ reference notes or in the comment beside the key; a note after the name says where the
two differ in unit or meaning.
"""

from __future__ import annotations

ROCKETMQ_NAMES: dict[str, str] = {
    "store.geometry.commitlog_file_size": "mappedFileSizeCommitLog",
    "store.geometry.cq_entries_per_file": "mappedFileSizeConsumeQueue (bytes there, entries of 20 B here)",
    "store.geometry.index_slot_count": "maxHashSlotNum",
    "store.geometry.index_entry_count": "maxIndexNum",
    "store.max_body_bytes": "maxMessageSize",
    "store.check_crc_on_recover": "checkCRCOnRecover",
    "store.index_enabled": "messageIndexEnable",
    "store.max_query_count": "defaultQueryMaxNum",
    "store.max_transfer_count": "maxTransferCountOnMessageInMemory",
    "store.max_transfer_bytes": "maxTransferBytesOnMessageInMemory",
    "store.message_delay_level": "messageDelayLevel",
    "store.timer_wheel_enable": "timerWheelEnable",
    "store.timer_precision_ms": "timerPrecisionMs",
    "store.timer_max_delay_sec": "timerMaxDelaySec",
    "store.timer_roll_window_slot": "timerRollWindowSlot",
    "store.timer_log_file_size": "mappedFileSizeTimerLog",
    "store.timer_flush_interval_ms": "timerFlushIntervalMs",
    "flush.mode": "flushDiskType",
    "flush.interval_ms": "flushIntervalCommitLog",
    "flush.least_pages": "flushCommitLogLeastPages",
    "flush.thorough_interval_ms": "flushCommitLogThoroughInterval",
    "flush.sync_timeout_ms": "syncFlushTimeout",
    "flush.cq_interval_ms": "flushIntervalConsumeQueue",
    "broker.default_queues": "defaultTopicQueueNums",
    "broker.offset_persist_interval_ms": "flushConsumerOffsetInterval",
    "broker.clean_interval_ms": "cleanResourceInterval",
    "broker.ack_max_deliveries": "maxReconsumeTimes",
    "broker.transaction_timeout_ms": "transactionTimeOut",
    "broker.transaction_check_max": "transactionCheckMax",
    "broker.transaction_check_interval_ms": "transactionCheckInterval",
    "broker.role": "brokerRole",
    "broker.broker_id": "brokerId",
    "retention.file_reserved_hours": "fileReservedTime",
    "retention.delete_when": "deleteWhen",
    "retention.disk_max_used_space_ratio": "diskMaxUsedSpaceRatio (a percentage there, a ratio here)",
    "retention.disk_clean_forcibly_ratio": "diskSpaceCleanForciblyRatio",
    "retention.disk_warning_ratio": "diskSpaceWarningLevelRatio",
    "retention.delete_file_batch_max": "deleteFileBatchMax",
    "remoting.port": "listenPort",
    "remoting.advertise_host": "brokerIP1",
    "remoting.broker_name": "brokerName",
    "remoting.max_frame_bytes": "frameMaxLength",
    "remoting.idle_timeout_ms": "serverChannelMaxIdleTimeSeconds (seconds there)",
    "remoting.max_reconsume_times": "maxReconsumeTimes",
    "remoting.namesrv": "namesrvAddr",
    "remoting.register_interval_ms": "registerNameServerPeriod",
    "ha.listen_port": "haListenPort",
    "ha.master_address": "haMasterAddress",
    "ha.in_sync_replicas": "inSyncReplicas",
    "ha.max_gap_not_in_sync": "haMaxGapNotInSync",
    "ha.transfer_batch_bytes": "haTransferBatchSize",
    "ha.heartbeat_interval_ms": "haSendHeartbeatInterval",
    "ha.housekeeping_interval_ms": "haHousekeepingInterval",
    "ha.access_key": "innerClientAuthenticationCredentials",
    "ha.secret_key": "innerClientAuthenticationCredentials",
}


def bare_name(entry: str) -> str:
    """The RocketMQ name alone, without the note after it."""
    return entry.split(" ", 1)[0]
