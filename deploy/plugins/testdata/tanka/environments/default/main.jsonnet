local app = import 'app.libsonnet';

// Top-level arguments, which the Application's tlas parameter sets.
function(replicas='1', tag='10.0.0') {
  grafana: app.new('grafana', 'grafana/grafana:' + tag, std.parseInt(replicas)),
}
