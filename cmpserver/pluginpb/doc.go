// Package pluginpb is the generated wire contract of Argo CD's
// plugin.ConfigManagementPluginService (plus repository.ParameterAnnouncement).
// Edit the .proto files and run hack/proto.sh; never edit the .pb.go files.
package pluginpb
