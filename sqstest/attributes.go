package sqstest

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// Queue attribute names.
const (
	attrDelay            = "DelaySeconds"
	attrMaxSize          = "MaximumMessageSize"
	attrRetention        = "MessageRetentionPeriod"
	attrWait             = "ReceiveMessageWaitTimeSeconds"
	attrVisibility       = "VisibilityTimeout"
	attrPolicy           = "Policy"
	attrRedrive          = "RedrivePolicy"
	attrRedriveAllow     = "RedriveAllowPolicy"
	attrKmsKey           = "KmsMasterKeyId"
	attrKmsReuse         = "KmsDataKeyReusePeriodSeconds"
	attrSSE              = "SqsManagedSseEnabled"
	attrFifo             = "FifoQueue"
	attrContentDedup     = "ContentBasedDeduplication"
	attrDedupScope       = "DeduplicationScope"
	attrThroughput       = "FifoThroughputLimit"
	attrNumVisible       = "ApproximateNumberOfMessages"
	attrNumNotVisible    = "ApproximateNumberOfMessagesNotVisible"
	attrNumDelayed       = "ApproximateNumberOfMessagesDelayed"
	attrCreated          = "CreatedTimestamp"
	attrLastModified     = "LastModifiedTimestamp"
	attrArn              = "QueueArn"
	defaultVisibility    = 30
	defaultRetention     = 4 * 24 * 60 * 60
	defaultMaxSize       = 1 << 20
	maxVisibilitySeconds = 12 * 60 * 60
)

// readOnlyAttributes are computed, never set.
var readOnlyAttributes = map[string]bool{
	attrNumVisible: true, attrNumNotVisible: true, attrNumDelayed: true,
	attrCreated: true, attrLastModified: true, attrArn: true,
}

// fifoOnlyAttributes may be set on FIFO queues only.
var fifoOnlyAttributes = map[string]bool{
	attrContentDedup: true, attrDedupScope: true, attrThroughput: true,
}

type intRange struct{ min, max int }

var intAttributes = map[string]intRange{
	attrDelay:      {0, 900},
	attrMaxSize:    {1024, 1 << 20},
	attrRetention:  {60, 1209600},
	attrWait:       {0, 20},
	attrVisibility: {0, maxVisibilitySeconds},
	attrKmsReuse:   {60, 86400},
}

// redrivePolicy is a parsed RedrivePolicy attribute.
type redrivePolicy struct {
	targetARN       string
	maxReceiveCount int
}

// normalizeAttributes validates attributes for a queue (fifo says which
// kind) and returns them in the canonical form GetQueueAttributes reports,
// so that CreateQueue can compare them with an existing queue's. The
// redrive target is checked by the caller, which holds the queue registry.
func normalizeAttributes(attrs map[string]string, fifo, creating bool) (map[string]string, *api.Error) {
	out := make(map[string]string, len(attrs))
	for name, v := range attrs {
		switch {
		case readOnlyAttributes[name]:
			return nil, api.SenderError("InvalidAttributeName", "Unknown Attribute %s.", name)
		case name == attrFifo:
			if !creating {
				return nil, api.SenderError("InvalidAttributeName", "Attribute FifoQueue can only be set on queue creation.")
			}
			b, ok := parseBool(v)
			if !ok {
				return nil, api.InvalidAttributeValue("Invalid value for the parameter FifoQueue.")
			}
			if b != fifo {
				return nil, api.InvalidParameter("The name of a FIFO queue must end with the .fifo suffix, and only FIFO queues may have FifoQueue=true.")
			}
			out[name] = strconv.FormatBool(b)
		case fifoOnlyAttributes[name] && !fifo:
			return nil, api.SenderError("InvalidAttributeName", "Unknown Attribute %s.", name)
		case name == attrContentDedup || name == attrSSE:
			b, ok := parseBool(v)
			if !ok {
				return nil, api.InvalidAttributeValue("Invalid value for the parameter %s.", name)
			}
			out[name] = strconv.FormatBool(b)
		case name == attrDedupScope:
			if v != "messageGroup" && v != "queue" {
				return nil, api.InvalidAttributeValue("Invalid value for the parameter DeduplicationScope.")
			}
			out[name] = v
		case name == attrThroughput:
			if v != "perQueue" && v != "perMessageGroupId" {
				return nil, api.InvalidAttributeValue("Invalid value for the parameter FifoThroughputLimit.")
			}
			out[name] = v
		case name == attrRedrive:
			if v == "" {
				out[name] = "" // removes the policy
				continue
			}
			p, err := parseRedrivePolicy(v)
			if err != nil {
				return nil, err
			}
			out[name] = p.String()
		case name == attrRedriveAllow || name == attrPolicy:
			if v != "" && !json.Valid([]byte(v)) {
				return nil, api.InvalidAttributeValue("Invalid value for the parameter %s: not a JSON document.", name)
			}
			out[name] = v
		case name == attrKmsKey:
			out[name] = v
		default:
			r, ok := intAttributes[name]
			if !ok {
				return nil, api.SenderError("InvalidAttributeName", "Unknown Attribute %s.", name)
			}
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < r.min || n > r.max {
				return nil, api.InvalidAttributeValue("Invalid value for the parameter %s: must be an integer from %d to %d.", name, r.min, r.max)
			}
			out[name] = strconv.Itoa(n)
		}
	}
	return out, nil
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// parseRedrivePolicy accepts maxReceiveCount as a JSON number or string, as
// AWS does.
func parseRedrivePolicy(v string) (*redrivePolicy, *api.Error) {
	var raw struct {
		DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	bad := func(reason string) *api.Error {
		return api.InvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: %s", v, reason)
	}
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, bad("Redrive policy is not a valid JSON map.")
	}
	if raw.DeadLetterTargetArn == "" {
		return nil, bad("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
	}
	count := strings.Trim(string(raw.MaxReceiveCount), `"`)
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > 1000 {
		return nil, bad("Invalid value for maxReceiveCount: must be an integer from 1 to 1000.")
	}
	return &redrivePolicy{targetARN: raw.DeadLetterTargetArn, maxReceiveCount: n}, nil
}

func (p *redrivePolicy) String() string {
	b, _ := json.Marshal(struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}{p.targetARN, p.maxReceiveCount})
	return string(b)
}

// allAttributeNames lists what "All" returns, in a stable order.
var allAttributeNames = []string{
	attrArn, attrNumVisible, attrNumNotVisible, attrNumDelayed, attrCreated, attrLastModified,
	attrVisibility, attrMaxSize, attrRetention, attrDelay, attrWait, attrSSE,
	attrRedrive, attrRedriveAllow, attrPolicy, attrKmsKey, attrKmsReuse,
	attrFifo, attrContentDedup, attrDedupScope, attrThroughput,
}

// knownAttribute reports whether GetQueueAttributes accepts name.
func knownAttribute(name string) bool {
	for _, n := range allAttributeNames {
		if n == name {
			return true
		}
	}
	return false
}
