// Package backlog computes the figures an autoscaler needs for a queue of
// requests: the backlog per worker, the backlog a worker can carry within
// an acceptable latency, and the number of workers that follows.
//
//	backlog per worker        = messages / running workers
//	target backlog per worker = concurrency x acceptable latency / average processing time
//	desired workers           = ceil(messages / target backlog per worker), clamped to [min, max]
//
// "Messages" are the queue's visible messages (ApproximateNumberOfMessages,
// the AWS recipe) by default; Options.IncludeInFlight adds the received and
// not yet deleted ones (ApproximateNumberOfMessagesNotVisible, KEDA's
// default) and Options.IncludeDelayed the delayed ones
// (ApproximateNumberOfMessagesDelayed). The counts are approximate on SQS
// and may lag by about a minute.
//
// Compute works on counts you have; Measure reads them with one
// GetQueueAttributes call; a Monitor measures periodically and publishes
// the last figures to its Observer (observe.Measured events), through
// Last, or as an expvar.Var. A worker that runs a responder knows its own
// average processing time (responder.Stats.AverageProcessingTime), so it
// can compute the target:
//
//	m, err := backlog.NewMonitor(sqsClient, queueURL, func(o *backlog.MonitorOptions) {
//		o.Inputs = func() backlog.Options {
//			return backlog.Options{
//				AcceptableLatency: 2 * time.Second,
//				MaxConcurrency:    10, // the responder's MaxConcurrency
//				ProcessingTime:    r.Stats().AverageProcessingTime,
//				Workers:           4,
//			}
//		}
//	})
//	go m.Run(ctx)
//	expvar.Publish("requests_backlog", m.Var()) // served at /debug/vars
//
// # EC2 Auto Scaling target tracking
//
// Target tracking keeps a metric at a target value. Use the backlog per
// instance, computed by CloudWatch metric math, as the metric and the
// target backlog per worker as the value (AWS's "Scaling policy based on
// Amazon SQS"). With a target of 100 (acceptable latency 10 s, 0.1 s per
// message, one message at a time):
//
//	aws autoscaling put-scaling-policy --auto-scaling-group-name workers \
//	  --policy-name sqs-backlog --policy-type TargetTrackingScaling \
//	  --target-tracking-configuration file://backlog.json
//
//	backlog.json:
//	{
//	  "TargetValue": 100,
//	  "CustomizedMetricSpecification": {
//	    "Metrics": [
//	      {"Id": "m1", "ReturnData": false, "MetricStat": {"Stat": "Sum", "Metric": {
//	        "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
//	        "Dimensions": [{"Name": "QueueName", "Value": "requests"}]}}},
//	      {"Id": "m2", "ReturnData": false, "MetricStat": {"Stat": "Average", "Metric": {
//	        "Namespace": "AWS/AutoScaling", "MetricName": "GroupInServiceInstances",
//	        "Dimensions": [{"Name": "AutoScalingGroupName", "Value": "workers"}]}}},
//	      {"Id": "e1", "Label": "backlog per instance", "Expression": "m1 / m2", "ReturnData": true}
//	    ]
//	  }
//	}
//
// The group's metrics collection must be enabled for
// GroupInServiceInstances. For ECS services, Application Auto Scaling
// accepts the same customized metric with RunningTaskCount
// (ECS/ContainerInsights, dimensions ClusterName and ServiceName) as m2.
// Recompute the target when the processing time changes: `tempq backlog`
// and Figures.TargetBacklogPerWorker give it. Set the group's min and max
// to MinWorkers and MaxWorkers.
//
// # KEDA
//
// KEDA's aws-sqs-queue scaler computes desired pods = ceil(messages /
// queueLength). Set queueLength to floor(TargetBacklogPerWorker) (at least
// 1), and choose what it counts to match Options: KEDA counts visible and
// in-flight messages by default (scaleOnInFlight: "true"), delayed ones
// with scaleOnDelayed: "true".
//
//	triggers:
//	- type: aws-sqs-queue
//	  metadata:
//	    queueURL: https://sqs.eu-west-1.amazonaws.com/123456789012/requests
//	    queueLength: "100"        # target backlog per pod
//	    scaleOnInFlight: "false"  # visible only, like the default Options
//	    awsRegion: eu-west-1
//
// Then DesiredWorkers equals KEDA's desired replica count for the same
// counts, before KEDA's own min/max replica clamp.
package backlog
